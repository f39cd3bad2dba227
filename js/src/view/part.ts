/** The pieces the run view is made of, and what they may use. */
import type { Action } from "../actions";
import type { RunState } from "../state";
import type { EditsAccess } from "./edits";
import type { PromptGuard } from "./guard";

/** Mounts a live view of run `requestId` (a child run) in `container` until `signal` aborts. */
export type ShowRun = (requestId: string, container: HTMLElement, signal: AbortSignal) => void;

export interface ViewContext {
  /**
   * Sends an action for the view's run, or for `requestId` (a child run shown in it); resolves
   * false (and the view shows why) when it failed.
   */
  act(action: Action, requestId?: string): Promise<boolean>;
  /** URL for a virtual path or data URL, or null when it cannot be fetched from this page. */
  resolveUrl(path: string): string | null;
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
  /** When a prompt is in view, and which clicks on its buttons count (guard.ts). */
  readonly guard: PromptGuard;
  /** The view of a child run, where the page can follow one; absent otherwise. */
  readonly showRun?: ShowRun;
  /** Reverting the run's notebook edits, where the page can (a Jupyter server); absent otherwise. */
  readonly edits?: EditsAccess;
  /** The view's lifetime: aborted when the view is disposed. */
  readonly signal: AbortSignal;
  /** How the user left fold `key` in the last view of this run on the page (folds.ts), if known. */
  readonly fold: (key: string) => boolean | undefined;
}

/** One region of the widget; `render` compares slices of `prev` and `state` by identity. */
export interface Part {
  readonly element: HTMLElement;
  render(state: RunState, prev: RunState | null): void;
  dispose?(): void;
}
