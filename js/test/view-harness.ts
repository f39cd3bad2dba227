/** A run view in an empty page, with the prompts' visibility and hit checks as a test sets them. */
import { vi } from "vitest";
import type { RunAction } from "../src/actions";
import type { NotebookEdits } from "../src/notebook";
import type { BrowserNotifications } from "../src/notify";
import type { RunState } from "../src/state";
import { ARM_DELAY_MS, type PromptGuard } from "../src/view/guard";
import { RunView } from "../src/view/run-view";
import { FakeClock } from "./clock";

export interface Harness {
  readonly container: HTMLElement;
  readonly clock: FakeClock;
  readonly view: RunView;
  readonly onAction: ReturnType<typeof vi.fn<(action: RunAction) => Promise<void>>>;
  /** Whether the guard counts a click as deliberate (true unless a test says otherwise). */
  deliberate: boolean;
  /** Render `state` now; returns it. */
  show(state: RunState): RunState;
  /** Let armed controls arm (they must have been in view a moment). */
  arm(): void;
  byTestId(id: string, root?: ParentNode): HTMLElement;
  all(id: string, root?: ParentNode): HTMLElement[];
}

export interface HarnessOptions {
  readonly onAction?: (action: RunAction) => Promise<void>;
  readonly notifications?: BrowserNotifications;
  readonly notebook?: NotebookEdits;
}

export function harness(options: HarnessOptions = {}): Harness {
  document.body.replaceChildren();
  const container = document.createElement("div");
  document.body.append(container);
  const clock = new FakeClock();
  const onAction = vi.fn<(action: RunAction) => Promise<void>>(options.onAction ?? (async () => {}));
  const guard: PromptGuard = {
    observe(_element, onChange) {
      onChange(true);
      return () => {};
    },
    deliberate: () => h.deliberate,
  };
  const view = new RunView(container, { onAction, resolveUrl: () => null, clock, guard, notifications: options.notifications, notebook: options.notebook });
  const h: Harness = {
    container,
    clock,
    view,
    onAction,
    deliberate: true,
    show(state) {
      view.update(state);
      view.flush();
      return state;
    },
    arm() {
      clock.advance(ARM_DELAY_MS);
    },
    byTestId(id, root = container) {
      const found = root.querySelector<HTMLElement>(`[data-testid="${id}"]`);
      if (!found) throw new Error(`no ${id}`);
      return found;
    },
    all(id, root = container) {
      return [...root.querySelectorAll<HTMLElement>(`[data-testid="${id}"]`)];
    },
  };
  return h;
}
