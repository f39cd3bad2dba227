/** The pieces the run view is made of, and what they may use. */
import type { Action } from "../actions";
import type { RunState } from "../state";
import type { PromptGuard } from "./guard";

export interface ViewContext {
  /** Sends an action; resolves false (and the view shows why) when it failed. */
  act(action: Action): Promise<boolean>;
  /** URL for a virtual path or data URL, or null when it cannot be fetched from this page. */
  resolveUrl(path: string): string | null;
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
  /** When a prompt is in view, and which clicks on its buttons count (guard.ts). */
  readonly guard: PromptGuard;
}

/** One region of the widget; `render` compares slices of `prev` and `state` by identity. */
export interface Part {
  readonly element: HTMLElement;
  render(state: RunState, prev: RunState | null): void;
  dispose?(): void;
}
