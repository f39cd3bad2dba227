/**
 * The two places where the run waits for the user: a permission ask and a clarify request. Their
 * buttons answer only a deliberate click once the prompt has been in view a moment (guard.ts).
 */
import type { Action } from "../actions";
import { sameRequest, type AskPreview, type ClarifyRequest, type PermissionAsk, type RunState } from "../state";
import { button, h, setVisible, textarea } from "./dom";
import { shortIds, toolLabel } from "./format";
import { ArmedControls } from "./guard";
import type { Part, ViewContext } from "./part";
import { diffBlock } from "./diff";
import { argsBlock, showArgs } from "./tools";

/**
 * Sends an action with the prompt's controls disabled; they come back only if sending failed. On
 * success the prompt stays disabled until the run moves on and the state clears it.
 */
async function sendWith(ctx: ViewContext, action: Action, controls: ArmedControls): Promise<boolean> {
  controls.setBusy(true);
  const ok = await ctx.act(action);
  if (!ok) controls.setBusy(false);
  return ok;
}

/** One prompt at a time: built when its request arrives, its armed controls disposed with it. */
abstract class PromptPart<T extends PermissionAsk | ClarifyRequest> implements Part {
  abstract readonly element: HTMLElement;
  private shown: T | null = null;
  protected controls: ArmedControls | null = null;

  constructor(protected readonly ctx: ViewContext) {}

  protected abstract current(state: RunState): T | null;
  protected abstract build(request: T): HTMLElement[];

  render(state: RunState): void {
    this.show(this.current(state));
  }

  /**
   * Show `request` (null: none); the parent's view shows a child run's request this way. The same
   * request told again keeps the prompt as it is, its buttons the very nodes and still armed: a
   * click whose pointer went down before the redraw lands on the button it went down on.
   */
  show(request: T | null): void {
    if (sameRequest(this.shown, request)) return;
    this.shown = request;
    this.controls?.dispose();
    this.controls = null;
    setVisible(this.element, request !== null);
    this.element.replaceChildren(...(request !== null ? this.build(request) : []));
  }

  dispose(): void {
    this.controls?.dispose();
  }

  /** Controls that arm once `watched` (the row holding them) is wholly in view. */
  protected arm(watched: HTMLElement, controls: readonly HTMLElement[]): ArmedControls {
    this.controls = new ArmedControls(this.ctx, this.ctx.guard, watched, controls);
    return this.controls;
  }
}

export class PermissionPart extends PromptPart<PermissionAsk> {
  readonly element = h("div", { className: "neta-prompt neta-permission", testid: "neta-permission" });

  constructor(ctx: ViewContext) {
    super(ctx);
    setVisible(this.element, false);
  }

  protected current(state: RunState): PermissionAsk | null {
    return state.permission;
  }

  protected build(ask: PermissionAsk): HTMLElement[] {
    const approve = button("Approve", "neta-approve", "neta-button neta-primary");
    const always = button("Always allow", "neta-always");
    const deny = button("Deny", "neta-deny", "neta-button neta-danger");
    const row = h("div", { className: "neta-prompt-buttons" }, [approve, always, deny]);
    const controls = this.arm(row, [approve, always, deny]);
    // The decision names what it was shown: the server runs the call only while it still does that.
    const shown = ask.digest === undefined ? {} : { digest: ask.digest };
    const decide = (approved: boolean, alwaysAllow: boolean) => () =>
      void sendWith(this.ctx, { action: "resume", askId: ask.askId, approved, always: alwaysAllow, ...shown }, controls);
    controls.on(approve, "click", decide(true, false));
    controls.on(always, "click", decide(true, true));
    controls.on(deny, "click", decide(false, false));

    const parts: HTMLElement[] = [permissionTitle(ask)];
    const args = argsBlock(ask.arguments, "neta-pre neta-permission-args");
    if (ask.preview) parts.push(...previewBlocks(ask.preview));
    // The preview says what the call does; its raw arguments stay at hand, folded.
    if (args && ask.preview) parts.push(h("details", { className: "neta-permission-more" }, [h("summary", { text: "Arguments" }), args]));
    else if (args) parts.push(args);
    const rule = ruleLine(ask);
    if (rule) parts.push(rule);
    parts.push(row);
    return parts;
  }
}

/**
 * Why the call asks, in words: the rule's description, and its pattern where that says more than
 * the tool's name the title already gives (not for `python`, nor `*`: any tool that changes things).
 */
function ruleLine(ask: PermissionAsk): HTMLElement | null {
  const pattern = ask.rulePattern?.trim() ?? "";
  let description = ask.ruleDescription?.trim().replace(/\.$/, "") ?? "";
  if (description === `rule ${pattern}`) description = ""; // a rule without a description of its own
  const specific = pattern !== "" && pattern !== "*" && pattern !== ask.toolName && pattern !== ask.mcp?.tool;
  if (!description && !specific) return null;
  const rule = h("div", { className: "neta-permission-rule", testid: "neta-permission-rule" });
  rule.append(description ? `Why: ${description}` : "Why: a permission rule");
  if (specific) rule.append(" (rule ", h("code", { text: pattern }), ")");
  rule.append(".");
  return rule;
}

/** What a notebook tool would do: the edit as a diff, or the source of the cell it would run. */
function previewBlocks(preview: AskPreview): HTMLElement[] {
  const blocks: HTMLElement[] = [];
  if (preview.stale) {
    const text = "The cell changed since the agent read it: this edit will be refused.";
    blocks.push(h("div", { className: "neta-permission-stale", testid: "neta-permission-stale", text }));
  }
  if (preview.kind === "diff") {
    blocks.push(diffBlock(preview.text, "neta-permission-preview"));
    return blocks;
  }
  const code = h("code");
  showArgs(code, { kind: "code", text: preview.text });
  const where = preview.cellId ? `Runs cell ${shortIds(preview.cellId)}:` : "Runs this cell:";
  blocks.push(h("div", { className: "neta-permission-where", text: where }));
  blocks.push(h("pre", { className: "neta-pre neta-permission-code", testid: "neta-permission-preview" }, [code]));
  return blocks;
}

/** "Allow `tool` to run?", naming the MCP server that offers the tool when one does. */
function permissionTitle(ask: PermissionAsk): HTMLElement {
  const label = toolLabel(ask.toolName, ask.mcp);
  const tool = h("code", { className: "neta-permission-tool", text: label.tool || "this tool" });
  if (label.server === undefined) return h("div", { className: "neta-prompt-title" }, ["Allow ", tool, " to run?"]);
  const server = h("code", { className: "neta-permission-server", testid: "neta-permission-server", text: label.server });
  return h("div", { className: "neta-prompt-title" }, ["Allow ", tool, " from the MCP server ", server, " to run?"]);
}

export class ClarifyPart extends PromptPart<ClarifyRequest> {
  readonly element = h("div", { className: "neta-prompt neta-clarify", testid: "neta-clarify" });

  constructor(ctx: ViewContext) {
    super(ctx);
    setVisible(this.element, false);
  }

  protected current(state: RunState): ClarifyRequest | null {
    return state.clarify;
  }

  protected build(request: ClarifyRequest): HTMLElement[] {
    const options = request.options.map((option) => button(option, "neta-clarify-option", "neta-button neta-option"));
    const send = button("Send", "neta-clarify-send", "neta-button neta-primary");
    const free = textarea("neta-clarify-input", "Your answer", (event) => {
      // Typing is always possible; Ctrl+Enter sends only as the Send button would.
      if (controls.ready && this.ctx.guard.deliberate(event, free)) answer(free.value);
    });
    const input = h("div", { className: "neta-input-row" }, [free, send]);
    // The options sit right above the input row, which is never empty: that row must be in view.
    const controls = this.arm(input, [...options, send]);
    const answer = (text: string): void => {
      if (text.trim() === "") return;
      void sendWith(this.ctx, { action: "resume", askId: request.clarifyId, answer: text }, controls);
    };
    options.forEach((option, i) => controls.on(option, "click", () => answer(request.options[i] ?? "")));
    controls.on(send, "click", () => answer(free.value));
    return [
      h("div", { className: "neta-prompt-title", text: request.question }),
      h("div", { className: "neta-prompt-buttons" }, options),
      input,
    ];
  }
}
