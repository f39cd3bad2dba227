/**
 * The run widget's DOM. `update(state)` only remembers the newest state and asks for an animation
 * frame; the frame renders whatever is newest then, so a burst of events costs one DOM pass. One
 * exception: the first text of a block (the answer's or the reasoning's) is rendered at once, so
 * the first token is on screen at the next frame with the render's work already done, not after
 * a wait for the frame and then the render; and that frame paints only it: what arrives meanwhile
 * (the next deltas, often in the same burst) is rendered in the frame after, so the frame that
 * shows the first word is not made longer by rendering more. That happens once per block; later
 * deltas are batched.
 *
 * A change to a block makes the browser lay all of it out again, however little changed. A long
 * paragraph is laid out piece by piece while it is written (markdown.ts), but a long code block,
 * list or table is one piece: the longer what a change lays out again, the longer the view waits
 * between two renders (one frame more per `CHARS_PER_SKIPPED_FRAME`), which keeps that layout work
 * per second bounded. It waits on a timer, so that no frames are asked for meanwhile.
 */
import type { Action, RunAction } from "../actions";
import { childLifetime, onAbort } from "../lifetime";
import type { NotebookEdits } from "../notebook";
import type { BrowserNotifications } from "../notify";
import type { RunState, TextSegment } from "../state";
import { prepareRendering } from "../markdown";
import { h, isolateKeys, setData } from "./dom";
import type { EditsAccess } from "./edits";
import { keepFolds, rememberedFold } from "./folds";
import { browserGuard, type PromptGuard } from "./guard";
import { NotifyPart } from "./notify-control";
import { HeaderPart } from "./header";
import { AttachmentsPart, AuthNoticePart, FooterPart, InputPart, TodoPart, ToastPart } from "./panels";
import type { Part, ShowRun, ViewContext } from "./part";
import { ProcessPart } from "./process";
import { ClarifyPart, PermissionPart } from "./prompts";
import { SubagentPart } from "./subagents";
import { ToolsPart } from "./tools";
import { AnswerPart, ReasoningPart } from "./transcript";

export interface FrameClock {
  requestFrame(callback: () => void): number;
  cancelFrame(handle: number): void;
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export interface RunViewOptions {
  readonly prompt?: string;
  /**
   * What the view shows from the start, rendered at once: a view that takes another's place (the
   * kernel updated the output at a rest, and JupyterLab made the widget's view anew) is never
   * blank for a frame.
   */
  readonly initial?: RunState;
  /** Performs an action (it names its run); rejects with an Error whose message is shown to the user. */
  readonly onAction: (action: RunAction) => Promise<void>;
  readonly resolveUrl: (path: string) => string | null;
  /** Shows a child run's live view inside this one (a sub-agent row opened). */
  readonly showRun?: ShowRun;
  /** The view is disposed when it aborts. */
  readonly signal?: AbortSignal;
  readonly clock?: FrameClock;
  /** Tests replace the browser's visibility and hit checks of the prompts. */
  readonly guard?: PromptGuard;
  /** The server's notebook edits, for the tool cards' Revert buttons (absent: no button). */
  readonly notebook?: NotebookEdits;
  /** The browser's notifications, for the "notify me" control (absent: no control). */
  readonly notifications?: BrowserNotifications | null;
}

/** Length laid out again per change, for each animation frame left out between two renders. */
export const CHARS_PER_SKIPPED_FRAME = 12 * 1024;
const MAX_SKIPPED_FRAMES = 12;
const MAX_SKIPPED_WHILE_CATCHING_UP = 2;
const FRAME_MS = 16;

export const browserClock: FrameClock = {
  requestFrame: (callback) => requestAnimationFrame(() => callback()),
  cancelFrame: (handle) => cancelAnimationFrame(handle),
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

/**
 * `state` shows text in its last block where that block is blank or absent on screen (`shown`):
 * the first delta of an answer or reasoning segment. A view that has not rendered yet is left to
 * its first frame, which shows everything (a replay or a restored run arrives in one burst).
 */
function startsText(state: RunState, shown: RunState): boolean {
  return opens(state.answer, shown.answer) || opens(state.reasoning, shown.reasoning);
}

function opens(segments: readonly TextSegment[], shown: readonly TextSegment[]): boolean {
  if (segments === shown || segments.length === 0) return false;
  const last = segments.length - 1;
  const before = shown[last];
  // Only what shows counts: a block that began with a blank line or two starts at its first word.
  // A text on screen longer than a few blank lines has begun: it is not read (a growing text is
  // a chain of pieces that reading would copy into one, at each batch).
  if (before && (before.text.length > BLANK_START || VISIBLE.test(before.text))) return false;
  return VISIBLE.test((segments[last] as TextSegment).text);
}

/** Longest blank start of a block that is still told apart from one that has begun. */
const BLANK_START = 64;
/** A character that shows. */
const VISIBLE = /\S/;

export class RunView {
  readonly root: HTMLElement;
  private readonly parts: Part[];
  private readonly header: HeaderPart;
  private readonly footer: FooterPart;
  private readonly answer: AnswerPart;
  private readonly clock: FrameClock;
  private state: RunState | null = null;
  private rendered: RunState | null = null;
  private frame: number | null = null;
  /** The frame that paints a block's first text, rendered at once; renders wait until it is over. */
  private painting: number | null = null;
  /** Frames to let pass before the next render, and the timer that lets them pass. */
  private skipFrames = 0;
  private wait: unknown = null;
  private disposed = false;
  private readonly lifetime: AbortController;

  constructor(container: HTMLElement, private readonly options: RunViewOptions) {
    this.clock = options.clock ?? browserClock;
    this.lifetime = childLifetime(options.signal);
    const ctx: ViewContext = {
      act: (action, requestId) => this.act(action, requestId),
      resolveUrl: options.resolveUrl,
      setTimeout: (callback, ms) => this.clock.setTimeout(callback, ms),
      clearTimeout: (handle) => this.clock.clearTimeout(handle),
      guard: options.guard ?? browserGuard,
      showRun: options.showRun,
      edits: options.notebook ? this.editsAccess(options.notebook) : undefined,
      signal: this.lifetime.signal,
      fold: (key) => rememberedFold(this.state?.requestId ?? "", key),
    };
    this.header = new HeaderPart(ctx, options.prompt ?? "");
    this.footer = new FooterPart(ctx);
    this.answer = new AnswerPart();
    // Order on screen: what the agent thinks and does, what it asks, what it answers, then totals.
    this.parts = [
      this.header,
      new NotifyPart(ctx, options.notifications ?? null),
      new AuthNoticePart(),
      new ToastPart(ctx),
      new ReasoningPart(ctx),
      new TodoPart(),
      new ToolsPart(ctx),
      new ProcessPart(),
      new SubagentPart(ctx),
      new PermissionPart(ctx),
      new ClarifyPart(ctx),
      this.answer,
      new AttachmentsPart(ctx),
      this.footer,
      new InputPart(ctx),
    ];
    this.root = h("div", { className: "neta-run", testid: "neta-run" }, this.parts.map((p) => p.element));
    isolateKeys(this.root);
    container.append(this.root);
    onAbort(this.lifetime.signal, () => this.dispose());
    prepareRendering();
    if (options.initial) {
      this.state = options.initial;
      this.flush();
    }
  }

  /** Show this state at the next animation frame; at once if it starts a block's text. */
  update(state: RunState): void {
    if (this.disposed) return;
    this.state = state;
    if (this.rendered && startsText(state, this.rendered)) {
      this.flush();
      this.letPaint();
    } else this.requestFrame();
  }

  /** Keep the next frame for painting what was just rendered; what came since renders in the next. */
  private letPaint(): void {
    if (this.painting !== null || this.disposed) return;
    this.painting = this.clock.requestFrame(() => {
      this.painting = null;
      // Asked for during this frame's callbacks, so it is the next frame's.
      if (this.state !== this.rendered || this.answer.pending) this.requestFrame();
    });
  }

  /** Render now; the frame callback, and tests, call it. */
  flush(): void {
    if (this.frame !== null) this.clock.cancelFrame(this.frame);
    this.frame = null;
    const state = this.state;
    if (!state || (state === this.rendered && !this.answer.pending) || this.disposed) return;
    // A state with fewer seqs than the one on screen is a fresh start (e.g. a replay): redraw all.
    const prev = this.rendered && state.lastSeq >= this.rendered.lastSeq ? this.rendered : null;
    for (const part of this.parts) part.render(state, prev);
    setData(this.root, "status", state.status);
    setData(this.root, "lastSeq", state.lastSeq);
    if (state.requestId) setData(this.root, "requestId", state.requestId);
    this.rendered = state;
    // More text arrived than one render shows (a replay, a restored answer): go on soon.
    const pending = this.answer.pending;
    const skip = Math.floor(this.answer.openLength / CHARS_PER_SKIPPED_FRAME);
    this.skipFrames = Math.min(pending ? MAX_SKIPPED_WHILE_CATCHING_UP : MAX_SKIPPED_FRAMES, skip);
    if (pending) this.requestFrame();
  }

  private requestFrame(): void {
    if (this.frame !== null || this.wait !== null || this.painting !== null || this.disposed) return;
    if (this.skipFrames > 0) {
      this.wait = this.clock.setTimeout(() => {
        this.wait = null;
        this.requestFrame();
      }, this.skipFrames * FRAME_MS);
      this.skipFrames = 0;
      return;
    }
    this.frame = this.clock.requestFrame(() => this.flush());
  }

  setPrompt(prompt: string): void {
    this.header.setPrompt(prompt);
  }

  /** A message from outside the event stream (lost connection, refused action); null clears it. */
  setNotice(message: string | null): void {
    this.footer.setNotice(message);
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    if (this.rendered?.requestId) keepFolds(this.rendered.requestId, this.root);
    this.lifetime.abort();
    if (this.frame !== null) this.clock.cancelFrame(this.frame);
    if (this.painting !== null) this.clock.cancelFrame(this.painting);
    if (this.wait !== null) this.clock.clearTimeout(this.wait);
    this.frame = null;
    this.painting = null;
    this.wait = null;
    for (const part of this.parts) part.dispose?.();
    this.root.remove();
  }

  /** The edits of the view's run: which are reverted is read once per run the view shows. */
  private editsAccess(notebook: NotebookEdits): EditsAccess {
    let known: { requestId: string; ids: Promise<ReadonlySet<string>> } | null = null;
    return {
      revert: (editId) => notebook.revert(editId),
      reverted: () => {
        const requestId = this.state?.requestId;
        if (!requestId) return Promise.resolve(new Set());
        if (known?.requestId !== requestId) known = { requestId, ids: notebook.reverted(requestId) };
        return known.ids;
      },
    };
  }

  private async act(action: Action, target?: string): Promise<boolean> {
    const requestId = target ?? this.state?.requestId;
    if (!requestId) {
      this.setNotice("The run has not started yet");
      return false;
    }
    try {
      await this.options.onAction({ ...action, requestId });
      this.setNotice(null);
      return true;
    } catch (error) {
      this.setNotice(error instanceof Error ? error.message : String(error));
      return false;
    }
  }
}
