/** A run view in an empty page for the view tests, made anew before each (`beforeEach(setup)`). */
import { vi } from "vitest";
import type { RunAction } from "../src/actions";
import type { RunState } from "../src/state";
import type { PromptGuard } from "../src/view/guard";
import { RunView } from "../src/view/run-view";
import { FakeClock } from "./clock";
import type { Envelope } from "./helpers";

export let container: HTMLElement;
export let clock: FakeClock;
export let onAction: ReturnType<typeof vi.fn<(action: RunAction) => Promise<void>>>;
export let view: RunView;

/** The browser's visibility and hit checks, as a test sets them: in view, every click deliberate. */
export const guard = {
  visible: true,
  deliberate: true,
  watchers: new Set<(visible: boolean) => void>(),
  setVisible(visible: boolean): void {
    this.visible = visible;
    for (const watcher of this.watchers) watcher(visible);
  },
};
const testGuard: PromptGuard = {
  observe(_element, onChange) {
    guard.watchers.add(onChange);
    onChange(guard.visible);
    return () => guard.watchers.delete(onChange);
  },
  deliberate: () => guard.deliberate,
};

export interface SetupOptions {
  readonly prompt?: string;
  readonly resolveUrl?: (path: string) => string | null;
}

const DOWNLOAD = (path: string) => (path.startsWith("data:") ? path : `/base/download?virtualPath=${encodeURIComponent(path)}`);

/** A new view in an empty page (before each test, and again where a test needs a fresh one). */
export function setup(options: SetupOptions = {}): void {
  guard.visible = true;
  guard.deliberate = true;
  guard.watchers.clear();
  document.body.replaceChildren();
  container = document.createElement("div");
  document.body.append(container);
  clock = new FakeClock();
  onAction = vi.fn<(action: RunAction) => Promise<void>>(async () => {});
  view = new RunView(container, {
    prompt: options.prompt ?? "which columns have missing values?",
    onAction,
    resolveUrl: options.resolveUrl ?? DOWNLOAD,
    clock,
    guard: testGuard,
  });
}

export function byTestId(id: string, root: ParentNode = container): HTMLElement {
  const found = root.querySelector<HTMLElement>(`[data-testid="${id}"]`);
  if (!found) throw new Error(`no ${id}`);
  return found;
}

export function all(id: string, root: ParentNode = container): HTMLElement[] {
  return [...root.querySelectorAll<HTMLElement>(`[data-testid="${id}"]`)];
}

export function show(state: RunState): RunState {
  view.update(state);
  clock.runFrames();
  return state;
}

export function until(events: Envelope[], eventType: string): Envelope[] {
  return events.slice(0, events.findIndex((e) => e.eventType === eventType) + 1);
}

export const settle = () => new Promise((resolve) => setTimeout(resolve, 0));
