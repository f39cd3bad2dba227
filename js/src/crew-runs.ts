/**
 * The tasks of a crew board opened into their runs: each opened task shows the live view of its
 * current attempt's run (the run widget's own view and transports, live-run.ts), a retried task
 * the run of its new attempt. Closing a task, or the board's view going away, ends its stream.
 *
 * The run view's code (and the markdown libraries it renders with) loads on the first opening,
 * so a board nobody opens costs nothing more.
 */
import type { Connections } from "./live-run";
import type { CommModel } from "./transport";

interface Opened {
  /** The run shown ("" while the task has none yet). */
  requestId: string;
  readonly el: HTMLElement;
  readonly life: AbortController;
}

export class TaskRuns {
  private readonly opened = new Map<string, Opened>();
  private connections: Connections | null = null;

  constructor(
    private readonly model: CommModel,
    private readonly mode: () => unknown,
    private readonly lifetime: AbortSignal,
  ) {
    lifetime.addEventListener("abort", () => {
      for (const taskId of [...this.opened.keys()]) this.close(taskId);
    });
  }

  isOpen(taskId: string): boolean {
    return this.opened.has(taskId);
  }

  /** Open the task (following `requestId`, its current run) or close it. */
  toggle(taskId: string, requestId: string): void {
    if (this.opened.has(taskId)) this.close(taskId);
    else if (!this.lifetime.aborted) this.opened.set(taskId, this.open(requestId));
  }

  /**
   * Where the opened task's run is shown, now following `requestId` (a new attempt's run replaces
   * the one before); null for a task that is not open. The element stays the same between two
   * calls for one run, so the board can move it into each of its redraws.
   */
  view(taskId: string, requestId: string): HTMLElement | null {
    const known = this.opened.get(taskId);
    if (!known) return null;
    if (!requestId || requestId === known.requestId) return known.el;
    known.life.abort();
    const next = this.open(requestId);
    this.opened.set(taskId, next);
    return next.el;
  }

  private close(taskId: string): void {
    this.opened.get(taskId)?.life.abort();
    this.opened.delete(taskId);
  }

  private open(requestId: string): Opened {
    const el = document.createElement("div");
    el.dataset.testid = "neta-crew-run";
    el.dataset.requestId = requestId;
    const life = new AbortController();
    if (!requestId) {
      el.textContent = "This task has no run yet.";
      return { requestId, el, life };
    }
    void import("./live-run").then((live) => {
      if (life.signal.aborted) return;
      this.connections ??= new live.Connections({ model: this.model, mode: this.mode, ownId: () => "" });
      live.showRun(this.connections, requestId, el, life.signal);
    });
    return { requestId, el, life };
  }
}
