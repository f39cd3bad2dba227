/** A frame clock and timers that move only when a test says so. */
import type { FrameClock } from "../src/view/run-view";

export class FakeClock implements FrameClock {
  frames = new Map<number, () => void>();
  timers = new Map<number, { due: number; callback: () => void }>();
  frameRequests = 0;
  now = 0;
  private next = 1;

  requestFrame(callback: () => void): number {
    this.frameRequests++;
    const handle = this.next++;
    this.frames.set(handle, callback);
    return handle;
  }
  cancelFrame(handle: number): void {
    this.frames.delete(handle);
  }
  setTimeout(callback: () => void, ms: number): unknown {
    const handle = this.next++;
    this.timers.set(handle, { due: this.now + ms, callback });
    return handle;
  }
  clearTimeout(handle: unknown): void {
    this.timers.delete(handle as number);
  }
  runFrames(): void {
    const frames = [...this.frames.values()];
    this.frames.clear();
    frames.forEach((f) => f());
  }
  advance(ms: number): void {
    this.now += ms;
    for (const [handle, timer] of [...this.timers]) {
      if (timer.due <= this.now) {
        this.timers.delete(handle);
        timer.callback();
      }
    }
  }
}
