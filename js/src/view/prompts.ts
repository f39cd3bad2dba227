/** The two places where the run waits for the user: a permission ask and a clarify request. */
import type { Action } from "../actions";
import type { ClarifyRequest, PermissionAsk, RunState } from "../state";
import { button, h, setVisible, textarea } from "./dom";
import { argsView } from "./format";
import type { Part, ViewContext } from "./part";

/**
 * Sends an action with `controls` disabled; they come back only if sending failed. On success
 * the prompt stays disabled until the run moves on and the state clears it.
 */
async function sendWith(ctx: ViewContext, action: Action, controls: readonly HTMLElement[]): Promise<boolean> {
  for (const control of controls) control.toggleAttribute("disabled", true);
  const ok = await ctx.act(action);
  if (!ok) for (const control of controls) control.toggleAttribute("disabled", false);
  return ok;
}

export class PermissionPart implements Part {
  readonly element = h("div", { className: "neta-prompt neta-permission", testid: "neta-permission" });
  private shown: PermissionAsk | null = null;

  constructor(private readonly ctx: ViewContext) {
    setVisible(this.element, false);
  }

  render(state: RunState): void {
    if (state.permission === this.shown) return;
    this.shown = state.permission;
    setVisible(this.element, state.permission !== null);
    this.element.replaceChildren(...(state.permission ? this.build(state.permission) : []));
  }

  private build(ask: PermissionAsk): HTMLElement[] {
    const approve = button("Approve", "neta-approve", "neta-button neta-primary");
    const always = button("Always allow", "neta-always");
    const deny = button("Deny", "neta-deny", "neta-button neta-danger");
    const buttons = [approve, always, deny];
    const decide = (approved: boolean, alwaysAllow: boolean) => () =>
      void sendWith(this.ctx, { action: "resume", askId: ask.askId, approved, always: alwaysAllow }, buttons);
    approve.addEventListener("click", decide(true, false));
    always.addEventListener("click", decide(true, true));
    deny.addEventListener("click", decide(false, false));

    const title = h("div", { className: "neta-prompt-title" }, [
      "Allow ",
      h("code", { className: "neta-permission-tool", text: ask.toolName || "this tool" }),
      " to run?",
    ]);
    const parts: HTMLElement[] = [title];
    const args = argsView(ask.arguments);
    if (args.text) parts.push(h("pre", { className: "neta-pre neta-permission-args", text: args.text }));
    if (ask.ruleDescription || ask.rulePattern) {
      const rule = h("div", { className: "neta-permission-rule", text: ask.ruleDescription ?? "" });
      if (ask.rulePattern) rule.append(" ", h("code", { text: ask.rulePattern }));
      parts.push(rule);
    }
    parts.push(h("div", { className: "neta-prompt-buttons" }, buttons));
    return parts;
  }
}

export class ClarifyPart implements Part {
  readonly element = h("div", { className: "neta-prompt neta-clarify", testid: "neta-clarify" });
  private shown: ClarifyRequest | null = null;

  constructor(private readonly ctx: ViewContext) {
    setVisible(this.element, false);
  }

  render(state: RunState): void {
    if (state.clarify === this.shown) return;
    this.shown = state.clarify;
    setVisible(this.element, state.clarify !== null);
    this.element.replaceChildren(...(state.clarify ? this.build(state.clarify) : []));
  }

  private build(request: ClarifyRequest): HTMLElement[] {
    const options = request.options.map((option) => button(option, "neta-clarify-option", "neta-button neta-option"));
    const send = button("Send", "neta-clarify-send", "neta-button neta-primary");
    const controls = [...options, send];
    const answer = (text: string): void => {
      if (text.trim() === "") return;
      void sendWith(this.ctx, { action: "resume", askId: request.clarifyId, answer: text }, controls);
    };
    const free = textarea("neta-clarify-input", "Your answer", () => answer(free.value));
    options.forEach((option, i) => option.addEventListener("click", () => answer(request.options[i] ?? "")));
    send.addEventListener("click", () => answer(free.value));
    return [
      h("div", { className: "neta-prompt-title", text: request.question }),
      h("div", { className: "neta-prompt-buttons" }, options),
      h("div", { className: "neta-input-row" }, [free, send]),
    ];
  }
}
