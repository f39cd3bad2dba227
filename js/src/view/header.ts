/** The header: the prompt (two lines at most until the user asks for more), the status, the controls. */
import type { Action } from "../actions";
import type { RunState } from "../state";
import { button, h, setData, setText, setVisible } from "./dom";
import { statusLabel, wasStopped } from "./format";
import type { Part, ViewContext } from "./part";

/**
 * Characters of the prompt laid out while it is folded: well over two lines at any width, and a
 * prompt of a hundred kilobytes (a pasted file) is not laid out whole only to be clipped.
 */
const FOLDED_CHARS = 600;
/** A prompt this long, or of more lines than two, surely needs more than two lines. */
const SURELY_LONG_CHARS = 240;

/** The prompt as a heading: folded to two lines, with "show more" when it has more. */
export class PromptText {
  readonly element = h("div", { className: "neta-prompt-text", testid: "neta-prompt-text" });
  private readonly body = h("span", { className: "neta-prompt-body", testid: "neta-prompt-body" });
  private readonly more = button("show more", "neta-prompt-more", "neta-button neta-link-button");
  private prompt = "";
  private open = false;
  private readonly resize: ResizeObserver | null = null;

  constructor() {
    this.element.append(this.body, this.more);
    this.more.addEventListener("click", () => {
      this.open = !this.open;
      this.show();
    });
    // Whether two lines hold a shorter prompt depends on the width: measured where the page can.
    if (typeof ResizeObserver !== "undefined") {
      this.resize = new ResizeObserver(() => this.showToggle());
      this.resize.observe(this.body);
    }
  }

  set(prompt: string): void {
    if (prompt === this.prompt) return;
    this.prompt = prompt;
    this.open = false;
    this.show();
  }

  dispose(): void {
    this.resize?.disconnect();
  }

  private show(): void {
    const folded = !this.open;
    setText(this.body, folded ? this.prompt.slice(0, FOLDED_CHARS) : this.prompt);
    setData(this.element, "folded", String(folded));
    setVisible(this.element, this.prompt !== "");
    setText(this.more, folded ? "show more" : "show less");
    this.more.setAttribute("aria-expanded", String(!folded));
    this.showToggle();
  }

  private showToggle(): void {
    const lines = this.prompt.split("\n", 3).length;
    const surely = lines > 2 || this.prompt.length > SURELY_LONG_CHARS;
    const clipped = !this.open && this.body.scrollHeight > this.body.clientHeight + 1;
    setVisible(this.more, this.open || surely || clipped);
  }
}

export class HeaderPart implements Part {
  readonly element = h("div", { className: "neta-header" });
  private readonly prompt = new PromptText();
  private readonly status = h("span", { className: "neta-status", testid: "neta-status" });
  /** Pausing and resuming decide nothing a tool does (an ask still asks): plain buttons. */
  private readonly pause = button("Pause", "neta-pause", "neta-button");
  private readonly resume = button("Resume", "neta-resume", "neta-button neta-primary");
  private readonly stop = button("Stop", "neta-stop", "neta-button neta-danger");

  constructor(private readonly ctx: ViewContext, prompt: string) {
    this.element.append(this.prompt.element, this.status, this.pause, this.resume, this.stop);
    this.setPrompt(prompt);
    this.bind(this.stop, { action: "terminate" });
    this.bind(this.pause, { action: "suspend" });
    this.bind(this.resume, { action: "resume" });
  }

  /** Disabled once clicked, until the run's status changes (or the action was refused). */
  private bind(control: HTMLButtonElement, action: Action): void {
    control.addEventListener("click", () => {
      control.disabled = true;
      void this.ctx.act(action).then((ok) => (control.disabled = ok));
    });
  }

  setPrompt(prompt: string): void {
    this.prompt.set(prompt);
  }

  render(state: RunState, prev: RunState | null): void {
    setText(this.status, statusLabel(state));
    // A run the user stopped did what was asked of it: not shown as a failure.
    setData(this.status, "status", wasStopped(state) ? "stopped" : state.status);
    const stoppable = state.status === "running" || state.status === "suspended";
    setVisible(this.stop, stoppable);
    setVisible(this.pause, state.status === "running");
    // A run waiting on an ask resumes through its prompt; one waiting on nothing, here.
    setVisible(this.resume, state.status === "suspended" && resumable(state));
    if (state.status !== prev?.status) {
      for (const control of [this.stop, this.pause, this.resume]) control.disabled = false;
    }
  }

  dispose(): void {
    this.prompt.dispose();
  }
}

const ANSWERED_BY_PROMPT = new Set(["PERMISSION_ASK", "CLARIFY_REQUEST"]);

/** A suspended run that waits on no ask (paused, interrupted by a shutdown, …). */
function resumable(state: RunState): boolean {
  const reason = state.suspendReason?.type;
  return reason !== undefined && !ANSWERED_BY_PROMPT.has(reason) && !state.permission && !state.clarify;
}
