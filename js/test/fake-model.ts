import type { WidgetModel } from "../src/widget";

type Callback = (...args: unknown[]) => void;

/** Just enough of anywidget's model: traits, change events, custom messages. */
export class FakeModel implements WidgetModel {
  traits: Record<string, unknown>;
  sent: unknown[] = [];
  saves = 0;
  private listeners = new Map<string, Set<Callback>>();

  constructor(traits: Record<string, unknown>) {
    this.traits = { ...traits };
  }
  get(name: string): unknown {
    return this.traits[name];
  }
  set(name: string, value: unknown): void {
    this.traits[name] = value;
    this.emit(`change:${name}`);
  }
  save_changes(): void {
    this.saves++;
  }
  send(content: unknown): void {
    this.sent.push(content);
  }
  on(name: string, callback: Callback): void {
    if (!this.listeners.has(name)) this.listeners.set(name, new Set());
    this.listeners.get(name)!.add(callback);
  }
  off(name: string, callback?: Callback): void {
    if (callback) this.listeners.get(name)?.delete(callback);
    else this.listeners.delete(name);
  }
  emit(name: string, ...args: unknown[]): void {
    this.listeners.get(name)?.forEach((cb) => cb(...args));
  }
  listenerCount(): number {
    return [...this.listeners.values()].reduce((n, set) => n + set.size, 0);
  }
}
