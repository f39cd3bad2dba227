/** One card per tool call: arguments streaming in, status, title, output, images, duration, failure. */
import { highlightCode } from "../highlight";
import { sanitizeHtml } from "../sanitize";
import type { Attachment, Keyed, RunState, ToolCard } from "../state";
import { h, setData, setText, setVisible } from "./dom";
import { EditsView } from "./edits";
import { figuresKey, figureViews, withoutPlaceholders } from "./figures";
import { foldable, restoreFold, type FoldLookup } from "./folds";
import { argsView, formatDuration, toolLabel, type ArgsView } from "./format";
import type { Part, ViewContext } from "./part";

/** Outputs longer than this are folded into a <details> so the answer stays in view. */
const LONG_OUTPUT_LINES = 15;
const LONG_OUTPUT_CHARS = 1500;

const STATUS_LABELS: Readonly<Record<string, string>> = {
  generating: "preparing",
  running: "running",
  completed: "done",
  failed: "failed",
  stopped: "stopped",
};

class ToolCardView {
  readonly element: HTMLElement;
  private readonly status = h("span", { className: "neta-badge" });
  private readonly name = h("span", { className: "neta-tool-name" });
  private readonly server = h("span", { className: "neta-tool-server", testid: "neta-tool-server" });
  private readonly title = h("span", { className: "neta-tool-title" });
  private readonly duration = h("span", { className: "neta-tool-duration" });
  private readonly argsCode = h("code");
  private readonly args = h("details", { className: "neta-tool-args", attrs: { open: "" } }, [
    h("summary", { text: "Arguments" }),
    h("pre", { className: "neta-pre" }, [this.argsCode]),
  ]);
  private readonly notices = h("div", { className: "neta-tool-notices" });
  private readonly streamed = h("pre", { className: "neta-pre neta-tool-streamed" });
  private readonly output = h("div", { className: "neta-tool-output-box", testid: "neta-tool-output-box" });
  private readonly images = h("div", { className: "neta-tool-images" });
  private readonly error = h("div", { className: "neta-tool-error" });
  private readonly edits: EditsView;
  private shownArgs: string | null = null;
  private waiting = false;
  private shownOutput: string | null = null;
  private shownFigures = "";
  /** The user folded or unfolded the arguments in the last view of the run: left as they are. */
  private readonly argsChosen: boolean;

  constructor(private readonly ctx: ViewContext, card: ToolCard) {
    this.edits = new EditsView(ctx);
    const head = h("div", { className: "neta-tool-head" }, [this.status, this.name, this.server, this.title, this.duration]);
    this.element = h("div", { className: "neta-tool", testid: "neta-tool-card" }, [
      head,
      this.args,
      this.notices,
      this.streamed,
      this.edits.element,
      this.output,
      this.images,
      this.error,
    ]);
    setData(this.element, "toolCallId", card.toolCallId);
    foldable(this.args, `args:${card.toolCallId}`);
    this.argsChosen = restoreFold(this.args, `args:${card.toolCallId}`, ctx.fold);
  }

  render(card: ToolCard, prev: ToolCard | undefined, waiting: boolean, attachments: Keyed<Attachment>): void {
    setData(this.element, "toolName", card.toolName);
    setData(this.element, "status", card.status);
    this.status.className = `neta-badge neta-badge-${waiting ? "waiting" : card.status}`;
    setText(this.status, waiting ? "needs approval" : (STATUS_LABELS[card.status] ?? card.status));
    const label = toolLabel(card.toolName, card.mcp);
    setText(this.name, label.tool || "tool");
    setText(this.server, label.server !== undefined ? `from ${label.server}` : "");
    setVisible(this.server, label.server !== undefined);
    setText(this.title, card.status === "running" ? (card.title ?? "") : "");
    setText(this.duration, card.durationMs !== undefined ? formatDuration(card.durationMs) : "");
    if (card.argsText !== prev?.argsText || card.status !== prev?.status || waiting !== this.waiting) {
      this.waiting = waiting;
      this.renderArgs(card);
    }
    if (card.notices !== prev?.notices) this.renderNotices(card);
    if (card.streamed !== prev?.streamed || card.output !== prev?.output) {
      setText(this.streamed, card.output === undefined ? card.streamed : "");
      setVisible(this.streamed, card.output === undefined && card.streamed !== "");
      this.streamed.scrollTop = this.streamed.scrollHeight; // the newest output in view
    }
    if (card.output !== prev?.output || card.outputRef !== prev?.outputRef || card.edits !== prev?.edits) this.renderOutput(card);
    const figures = figuresKey(card, attachments);
    if (figures !== this.shownFigures) {
      this.shownFigures = figures;
      this.images.replaceChildren(...figureViews(card, attachments, this.ctx.resolveUrl));
    }
    if (card.edits !== prev?.edits) {
      // The diff shows what the call changed: its arguments (the whole new source) fold away.
      if (card.edits.length > 0 && !prev?.edits.length && !this.argsChosen) this.args.open = false;
      this.edits.render(card.edits);
    }
    setText(this.error, card.status === "failed" ? card.errorMessage || "The tool failed" : "");
    setVisible(this.error, card.status === "failed");
  }

  private renderArgs(card: ToolCard): void {
    // While generating the JSON is incomplete: show the raw fragments as they stream in. A call
    // waiting for approval has all of its arguments, though it has not started.
    const complete = card.status !== "generating" || this.waiting;
    const view = complete ? argsView(card.argsText) : { kind: "raw" as const, text: card.argsText };
    const key = `${this.waiting}:${view.kind}:${view.text}`;
    if (key === this.shownArgs) return;
    this.shownArgs = key;
    showArgs(this.argsCode, view);
    // A call waiting for approval: its prompt, right below, shows what it would do.
    setVisible(this.args, !this.waiting && view.text !== "" && view.text !== "{}");
  }

  private renderNotices(card: ToolCard): void {
    this.notices.replaceChildren(
      ...card.notices.map((n) => h("div", { className: `neta-notice neta-notice-${n.category}`, text: n.message })),
    );
  }

  private renderOutput(card: ToolCard): void {
    // What a notebook edit did, its rows say (the diff, Revert): the summary is for the model.
    const output = card.edits.length > 0 ? "" : withoutPlaceholders(card.output ?? "", card);
    const key = `${output}\u0000${card.truncated}\u0000${card.outputRef ?? ""}`;
    if (key === this.shownOutput) return;
    this.shownOutput = key;
    const children: HTMLElement[] = [];
    if (output !== "") children.push(outputBlock(output, `output:${card.toolCallId}`, this.ctx.fold));
    if (card.truncated) {
      const url = card.outputRef ? this.ctx.resolveUrl(card.outputRef) : null;
      const note = h("div", { className: "neta-tool-truncated", text: "Output truncated. " });
      if (url) note.append(h("a", { text: "Full output", attrs: { href: url, target: "_blank", rel: "noopener" } }));
      children.push(note);
    }
    this.output.replaceChildren(...children);
  }
}

const ARGS_LANGUAGES: Readonly<Record<ArgsView["kind"], string>> = { code: "python", json: "json", raw: "" };

/** Arguments in `code`: code and JSON highlighted, anything else as text. */
export function showArgs(code: HTMLElement, view: ArgsView): void {
  const language = ARGS_LANGUAGES[view.kind];
  code.className = language ? `hljs language-${language}` : "";
  // highlight.js escapes the text it marks up; the sanitiser makes sure that nothing else got in.
  if (language) code.innerHTML = sanitizeHtml(highlightCode(view.text, language));
  else code.textContent = view.text;
}

/** A `<pre>` of a call's complete arguments, or null when there are none to show. */
export function argsBlock(argsText: string, className: string): HTMLElement | null {
  const view = argsView(argsText);
  if (view.text === "" || view.text === "{}") return null;
  const code = h("code");
  showArgs(code, view);
  return h("pre", { className }, [code]);
}

/** A call's output; a long one folded (`key` names the fold, as the user may have left it). */
function outputBlock(output: string, key: string, fold: FoldLookup): HTMLElement {
  const pre = h("pre", { className: "neta-pre neta-tool-output", testid: "neta-tool-output", text: output });
  const lines = output.split("\n").length;
  // Titled, so that it reads apart from the code above it.
  if (lines <= LONG_OUTPUT_LINES && output.length <= LONG_OUTPUT_CHARS) {
    return h("div", { className: "neta-tool-output-short" }, [h("div", { className: "neta-tool-caption", text: "Output" }), pre]);
  }
  const details = h("details", { className: "neta-tool-output-long" }, [h("summary", { text: `Output (${lines} lines)` }), pre]);
  foldable(details, key);
  restoreFold(details, key, fold);
  return details;
}

export class ToolsPart implements Part {
  readonly element = h("div", { className: "neta-tools" });
  private readonly cards = new Map<string, ToolCardView>();

  constructor(private readonly ctx: ViewContext) {}

  render(state: RunState, prev: RunState | null): void {
    if (prev && state.tools === prev.tools && state.permission === prev.permission && state.attachments === prev.attachments) return;
    this.dropMissing(state);
    const waitingFor = state.permission?.toolCallId;
    const waitedFor = prev?.permission?.toolCallId;
    for (const id of state.tools.order) {
      const card = state.tools.byId[id];
      if (!card) continue;
      const view = this.cards.get(id);
      if (view) {
        const previous = prev?.tools.byId[id];
        const waitChanged = (id === waitingFor) !== (id === waitedFor);
        const pictured = card.images.length > 0 && state.attachments !== prev?.attachments;
        if (card !== previous || waitChanged || pictured) view.render(card, previous, id === waitingFor, state.attachments);
        continue;
      }
      const created = new ToolCardView(this.ctx, card);
      this.cards.set(id, created);
      this.element.append(created.element);
      created.render(card, undefined, id === waitingFor, state.attachments);
    }
  }

  /** A state that starts over (a fresh replay) may not have every card shown before. */
  private dropMissing(state: RunState): void {
    for (const [id, view] of this.cards) {
      if (!state.tools.byId[id]) {
        view.element.remove();
        this.cards.delete(id);
      }
    }
  }
}
