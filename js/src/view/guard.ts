/**
 * A permission or clarify prompt decides what runs in the user's kernel, so it must not be
 * answerable by accident or by a trick: other content on the page (a covering element, a button
 * stretched invisible over the window) could turn a click meant for something else into an
 * approval. Like a browser's own permission prompt, its buttons
 *
 * - arm only after they have been in view for `ARM_DELAY_MS` (shown disarmed meanwhile), and disarm
 *   again when they leave the view;
 * - count only a deliberate activation: a trusted event; for a pointer click, the button itself is
 *   the topmost element where the click landed; the button lies inside the viewport and is not
 *   transparent or hidden. A trusted key press (Enter or Space on the focused button) counts too.
 */
import type { ViewContext } from "./part";

/** How long a prompt's buttons must have been in view before they answer a click. */
export const ARM_DELAY_MS = 600;
/** The share of the buttons' row that must be in view (a pixel or two cut off by scrolling is not hiding). */
const IN_VIEW = 0.9;
/** The least opacity (of the button and its ancestors, multiplied) that counts as visible. */
const MIN_OPACITY = 0.9;

export interface PromptGuard {
  /** Calls `onChange(true)` once `element` is (nearly) wholly in view, `onChange(false)` when it is not; returns the stop. */
  observe(element: HTMLElement, onChange: (visible: boolean) => void): () => void;
  /** Whether `event` is the user's deliberate activation of `control`. */
  deliberate(event: Event, control: HTMLElement): boolean;
}

function observeInView(element: HTMLElement, onChange: (visible: boolean) => void): () => void {
  if (typeof IntersectionObserver === "undefined") {
    onChange(true);
    return () => {};
  }
  const observer = new IntersectionObserver(
    (entries) => {
      const entry = entries[entries.length - 1];
      if (entry) onChange(entry.isIntersecting && entry.intersectionRatio >= IN_VIEW);
    },
    { threshold: [0, IN_VIEW, 1] },
  );
  observer.observe(element);
  return () => observer.disconnect();
}

/** The control is laid out inside the viewport, visible and opaque. */
export function shownInViewport(control: HTMLElement): boolean {
  const view = control.ownerDocument.defaultView;
  if (!view || !control.isConnected) return false;
  const rect = control.getBoundingClientRect();
  if (rect.width <= 0 || rect.height <= 0) return false;
  if (rect.left < 0 || rect.top < 0 || rect.right > view.innerWidth || rect.bottom > view.innerHeight) return false;
  if (view.getComputedStyle(control).visibility !== "visible") return false;
  let opacity = 1;
  for (let node: Element | null = control; node; node = node.parentElement) {
    opacity *= Number.parseFloat(view.getComputedStyle(node).opacity || "1");
  }
  return opacity >= MIN_OPACITY;
}

/** Whether a trusted event activated `control` on purpose (see the module comment). */
export function isDeliberate(event: Event, control: HTMLElement): boolean {
  if (!event.isTrusted || !shownInViewport(control)) return false;
  const doc = control.ownerDocument;
  // Enter or Space on a focused button clicks it with no pointer (detail 0).
  const keyboard = event instanceof KeyboardEvent || (event instanceof MouseEvent && event.detail === 0);
  if (keyboard) return doc.activeElement === control;
  if (!(event instanceof MouseEvent)) return false;
  const hit = doc.elementFromPoint(event.clientX, event.clientY);
  return hit !== null && control.contains(hit);
}

export const browserGuard: PromptGuard = { observe: observeInView, deliberate: isDeliberate };

/**
 * The buttons of one prompt: disabled until armed, and while an answer is being sent. `on` binds a
 * handler that runs only for a deliberate activation of an armed, idle control.
 */
export class ArmedControls {
  private armed = false;
  private busy = false;
  private timer: unknown = null;
  private readonly stop: () => void;

  constructor(
    private readonly ctx: ViewContext,
    private readonly guard: PromptGuard,
    watched: HTMLElement,
    private readonly controls: readonly HTMLElement[],
  ) {
    this.refresh();
    this.stop = guard.observe(watched, (visible) => (visible ? this.arm() : this.disarm()));
  }

  /** Runs `handler` on a deliberate click (or key press) of `control` while armed. */
  on(control: HTMLElement, type: "click" | "keydown", handler: (event: Event) => void): void {
    control.addEventListener(type, (event) => {
      if (this.ready && this.guard.deliberate(event, control)) handler(event);
    });
  }

  get ready(): boolean {
    return this.armed && !this.busy;
  }

  setBusy(busy: boolean): void {
    this.busy = busy;
    this.refresh();
  }

  dispose(): void {
    this.stop();
    this.clearTimer();
  }

  private arm(): void {
    if (this.armed || this.timer !== null) return;
    this.timer = this.ctx.setTimeout(() => {
      this.timer = null;
      this.armed = true;
      this.refresh();
    }, ARM_DELAY_MS);
  }

  private disarm(): void {
    this.clearTimer();
    this.armed = false;
    this.refresh();
  }

  private clearTimer(): void {
    if (this.timer !== null) this.ctx.clearTimeout(this.timer);
    this.timer = null;
  }

  private refresh(): void {
    for (const control of this.controls) {
      control.toggleAttribute("disabled", !this.ready);
      control.dataset["armed"] = String(this.armed);
    }
  }
}
