import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { RunAction } from "../src/actions";
import { reduce, reduceAll } from "../src/reducer";
import { valuesOf } from "../src/state";
import { ARM_DELAY_MS, browserGuard, type PromptGuard } from "../src/view/guard";
import { RunView } from "../src/view/run-view";
import { mount } from "../src/widget";
import { FakeClock } from "./clock";
import { FakeModel } from "./fake-model";
import { childRun, delegatedRun, envelope, upTo } from "./helpers";

describe("the reducer, for a run that delegates", () => {
  const events = delegatedRun();

  it("announces a batch and a row per child, in order, queued until the child says more", () => {
    const state = reduceAll(upTo(events, "SUBAGENT_RUN_STARTED"));
    expect(state.subagents.byId["b1"]).toMatchObject({ batchId: "b1", done: false, children: ["r_child_a", "r_child_b"] });
    expect(valuesOf(state.children).map((c) => [c.requestId, c.role, c.status])).toEqual([
      ["r_child_a", "reader", "queued"],
      ["r_child_b", "analyst", "queued"],
    ]);
    expect(state.children.byId["r_child_a"]?.task).toBe("Summarise notes.txt");
  });

  it("follows each child's status, status line, tokens and duration; only the fields an event carries change", () => {
    const state = reduceAll(upTo(events, 4));
    expect(state.children.byId["r_child_a"]).toMatchObject({
      status: "running",
      message: "reading notes.txt",
      step: 1,
      totalTokens: 120,
      durationMs: 800,
      permission: null,
    });
    // An event that names the child by its agentId within the batch only.
    const done = reduceAll(upTo(events, 6)).children.byId["r_child_a"];
    expect(done).toMatchObject({ status: "completed", message: "reading notes.txt", totalTokens: 480, durationMs: 2400 });
    expect(done).toMatchObject({ answerPreview: "notes.txt lists three **ideas**", answerTruncated: true });
  });

  it("keeps what a suspended child waits for with it, and clears it once the child goes on", () => {
    const asking = reduceAll(upTo(events, 5)).children.byId["r_child_b"];
    expect(asking?.status).toBe("suspended");
    expect(asking?.permission).toEqual({
      askId: "ask_b",
      toolName: "python",
      toolCallId: "c_b",
      arguments: '{"code": "df.describe()"}',
      ruleDescription: undefined,
      rulePattern: undefined,
    });
    // The parent itself does not wait: its own prompt stays empty.
    expect(reduceAll(upTo(events, 5)).permission).toBeNull();
    const going = reduceAll(upTo(events, 7)).children.byId["r_child_b"];
    expect(going).toMatchObject({ status: "running", permission: null, clarify: null });
  });

  it("keeps the same ask told again with the child's next change, so its prompt is not built again", () => {
    const asking = reduceAll(upTo(events, 5));
    const again = reduce(asking, { ...events[5]!, seq: 6, data: { ...events[5]!.data, message: "Waiting for approval of python" } });
    expect(again.children.byId["r_child_b"]?.permission).toBe(asking.children.byId["r_child_b"]?.permission);
    expect(again.children.byId["r_child_b"]?.message).toBe("Waiting for approval of python");
  });

  it("takes a child's question the same way", () => {
    const asked = reduce(
      reduceAll(upTo(events, 4)),
      envelope("SUBAGENT_EVENT", 5, {
        type: "subagent",
        batchId: "b1",
        childRequestId: "r_child_b",
        status: "suspended",
        ask: { type: "clarify", clarifyId: "cl_b", question: "Which sheet?", options: ["1", "2"] },
      }, "r_parent"),
    );
    expect(asked.children.byId["r_child_b"]?.clarify).toEqual({ clarifyId: "cl_b", question: "Which sheet?", options: ["1", "2"] });
    expect(asked.children.byId["r_child_b"]?.permission).toBeNull();
  });

  it("ends the batch, and never throws on what it does not know", () => {
    const state = reduceAll(events);
    expect(state.subagents.byId["b1"]).toMatchObject({ done: true, status: "completed", message: "2 of 2 completed", events: 6 });
    expect(state.status).toBe("completed");
    const odd = [
      envelope("SUBAGENT_EVENT", 15, { type: "subagent", batchId: "b1", agentId: "nobody", status: "running" }, "r_parent"),
      envelope("SUBAGENT_EVENT", 16, { type: "subagent", batchId: "b1", childRequestId: 5, ask: "yes" }, "r_parent"),
      envelope("SUBAGENT_RUN_STARTED", 17, { type: "subagent", batchId: "b2", children: [null, { task: "no id" }, "x"] }, "r_parent"),
      envelope("SUBAGENT_EVENT", 18, { type: "subagent", batchId: "b3", childRequestId: "r_late", status: "hatching" }, "r_parent"),
    ];
    const after = reduceAll(odd, state);
    expect(after.lastSeq).toBe(18);
    expect(after.children.byId["5"]).toMatchObject({ status: "queued", permission: null });
    expect(after.subagents.byId["b2"]?.children).toEqual([]);
    // A child no SUBAGENT_RUN_STARTED announced still gets its row.
    expect(after.subagents.byId["b3"]?.children).toEqual(["r_late"]);
    expect(after.children.byId["r_late"]?.status).toBe("hatching");
  });

  it("leaves the run's own usage alone when a sub-agent's usage is counted in", () => {
    const own = reduceAll([
      ...upTo(events, 4),
      envelope("TOKEN_USAGE", 5, { type: "token_usage", inputTokens: 100, outputTokens: 20 }, "r_parent"),
    ]);
    const child = reduce(
      own,
      envelope("TOKEN_USAGE", 6, { type: "token_usage", inputTokens: 900, outputTokens: 90, subagentRequestId: "r_child_a" }, "r_parent"),
    );
    expect(child.usage).toBe(own.usage);
    expect(child.lastSeq).toBe(6);
  });

  it("is pure: the state before is left as it was", () => {
    const before = reduceAll(upTo(events, 4));
    const frozen = JSON.stringify(before);
    reduceAll(events.slice(5), before);
    expect(JSON.stringify(before)).toBe(frozen);
  });
});

// --- the panel -------------------------------------------------------------------------------------

let container: HTMLElement;
let clock: FakeClock;
let onAction: ReturnType<typeof vi.fn<(action: RunAction) => Promise<void>>>;
let opened: { requestId: string; container: HTMLElement; signal: AbortSignal }[];
let view: RunView;

const guard: PromptGuard = {
  observe: (_element, onChange) => {
    onChange(true);
    return () => {};
  },
  deliberate: () => true,
};

function byTestId(id: string, root: ParentNode = container): HTMLElement {
  const found = root.querySelector<HTMLElement>(`[data-testid="${id}"]`);
  if (!found) throw new Error(`no ${id}`);
  return found;
}

function rows(): HTMLElement[] {
  return [...container.querySelectorAll<HTMLElement>('[data-testid="neta-subagent"]')];
}

function row(requestId: string): HTMLElement {
  const found = rows().find((r) => r.dataset["requestId"] === requestId);
  if (!found) throw new Error(`no row for ${requestId}`);
  return found;
}

function show(events: ReturnType<typeof delegatedRun>): void {
  view.update(reduceAll(events));
  clock.runFrames();
}

describe("the sub-agent panel", () => {
  beforeEach(() => {
    document.body.replaceChildren();
    container = document.createElement("div");
    document.body.append(container);
    clock = new FakeClock();
    opened = [];
    onAction = vi.fn<(action: RunAction) => Promise<void>>(async () => {});
    view = new RunView(container, {
      onAction,
      resolveUrl: () => null,
      clock,
      guard,
      showRun: (requestId, el, signal) => {
        opened.push({ requestId, container: el, signal });
        el.append(Object.assign(document.createElement("p"), { textContent: `the view of ${requestId}` }));
      },
    });
  });

  it("is hidden for a run that delegates nothing", () => {
    show(upTo(delegatedRun(), 1));
    expect(byTestId("neta-subagents").hidden).toBe(true);
  });

  it("shows a row per child: role, task, live status line, tokens and duration", () => {
    const events = delegatedRun();
    show(upTo(events, 4));
    expect(byTestId("neta-subagents").hidden).toBe(false);
    expect(rows().map((r) => r.dataset["requestId"])).toEqual(["r_child_a", "r_child_b"]);
    const a = row("r_child_a");
    expect(byTestId("neta-subagent-name", a).textContent).toBe("a1");
    expect(byTestId("neta-subagent-role", a).textContent).toBe("reader");
    expect(byTestId("neta-subagent-task", a).textContent).toBe("Summarise notes.txt");
    expect(byTestId("neta-subagent-status", a).textContent).toBe("Running · reading notes.txt");
    expect(byTestId("neta-subagent-meta", a).textContent).toBe("120 tokens · 800 ms");
    expect(byTestId("neta-subagent-title").textContent).toBe("2 sub-agents · 0 of 2 done");

    show(events);
    expect(byTestId("neta-subagent-meta", row("r_child_b")).textContent).toBe("650 tokens · 1 min 1 s");
    expect(byTestId("neta-subagent-status", a).textContent).toBe("Done · reading notes.txt");
    // The start of its answer as markdown, as the child's own view shows it.
    const preview = byTestId("neta-subagent-preview", a);
    expect(preview.textContent?.trim()).toBe("notes.txt lists three ideas…");
    expect(preview.querySelector("strong")?.textContent).toBe("ideas");
    expect(byTestId("neta-subagent-title").textContent).toBe("2 sub-agents · 2 of 2 completed");
    // The rows were updated in place, not built again.
    expect(row("r_child_a")).toBe(a);
    // A status line that only repeats the status is not shown twice.
    show([...events.slice(0, 6), envelope("SUBAGENT_EVENT", 6, { type: "subagent", batchId: "b1", agentId: "a1", status: "completed", message: "Done" }, "r_parent")]);
    expect(byTestId("neta-subagent-status", row("r_child_a")).textContent).toBe("Done");
  });

  it("shows what models wrote as text, and an answer's start as sanitised markdown: no markup of theirs gets into the page", () => {
    show(delegatedRun());
    const b = row("r_child_b");
    expect(b.querySelector("img, script, b")).toBeNull();
    expect(byTestId("neta-subagent-task", b).textContent).toBe('Profile data.csv <img src=x onerror="alert(1)">');
    expect(byTestId("neta-subagent-preview", b).textContent?.trim()).toBe("data.csv has 3 columns");
    show(upTo(delegatedRun(), 4));
    expect(byTestId("neta-subagent-status", row("r_child_b")).textContent).toBe("Running · <b>loading</b>");
  });

  it("answers a child's permission ask in place: the action names the child's run", async () => {
    show(upTo(delegatedRun(), 5));
    const b = row("r_child_b");
    expect(byTestId("neta-subagent-status", b).textContent).toBe("Waiting for your approval");
    expect(b.dataset["status"]).toBe("suspended");
    const prompt = byTestId("neta-permission", b);
    expect(prompt.hidden).toBe(false);
    expect(prompt.textContent).toContain("df.describe()");
    // The parent's own prompt is not the child's.
    expect(container.querySelector<HTMLElement>('.neta-run > [data-testid="neta-permission"]')?.hidden).toBe(true);
    clock.advance(ARM_DELAY_MS);
    byTestId("neta-approve", b).click();
    expect(onAction).toHaveBeenCalledWith({ action: "resume", requestId: "r_child_b", askId: "ask_b", approved: true, always: false });
    await Promise.resolve();
    show(upTo(delegatedRun(), 7));
    expect(byTestId("neta-permission", b).hidden).toBe(true);
  });

  it("answers a child's question in place too", () => {
    const asked = [
      ...upTo(delegatedRun(), 4),
      envelope("SUBAGENT_EVENT", 5, {
        type: "subagent",
        batchId: "b1",
        childRequestId: "r_child_a",
        status: "suspended",
        ask: { type: "clarify", clarifyId: "cl_a", question: "Which notes?", options: ["old", "new"] },
      }, "r_parent"),
    ];
    show(asked);
    const a = row("r_child_a");
    expect(byTestId("neta-subagent-status", a).textContent).toBe("Waiting for your answer");
    clock.advance(ARM_DELAY_MS);
    a.querySelectorAll<HTMLElement>('[data-testid="neta-clarify-option"]')[1]!.click();
    expect(onAction).toHaveBeenCalledWith({ action: "resume", requestId: "r_child_a", askId: "cl_a", answer: "new" });
  });

  it("opens a child into its own live view, which then shows the child's prompt, and closes it again", () => {
    show(upTo(delegatedRun(), 5));
    const b = row("r_child_b");
    byTestId("neta-subagent-toggle", b).click();
    expect(opened.map((o) => o.requestId)).toEqual(["r_child_b"]);
    const body = byTestId("neta-subagent-run", b);
    expect(opened[0]!.container).toBe(body);
    expect(body.hidden).toBe(false);
    expect(body.textContent).toBe("the view of r_child_b");
    expect(byTestId("neta-subagent-toggle", b).getAttribute("aria-expanded")).toBe("true");
    // The child's own view asks now: the row does not ask a second time.
    expect(byTestId("neta-permission", b).hidden).toBe(true);

    byTestId("neta-subagent-toggle", b).click();
    expect(opened[0]!.signal.aborted).toBe(true);
    expect(body.hidden).toBe(true);
    expect(body.childElementCount).toBe(0);
    expect(byTestId("neta-permission", b).hidden).toBe(false);
  });

  it("ends the child views it opened when it is disposed", () => {
    show(upTo(delegatedRun(), 5));
    byTestId("neta-subagent-toggle", row("r_child_a")).click();
    byTestId("neta-subagent-toggle", row("r_child_b")).click();
    view.dispose();
    expect(opened.map((o) => o.signal.aborted)).toEqual([true, true]);
  });
});

// --- in the widget, over the comm ------------------------------------------------------------------

describe("a child run in the widget (embedded mode)", () => {
  let el: HTMLElement;

  beforeEach(() => {
    vi.useFakeTimers();
    document.body.replaceChildren();
    el = document.createElement("div");
    document.body.append(el);
    // jsdom lays nothing out, so no click of a script passes the browser's checks: let these.
    vi.spyOn(browserGuard, "deliberate").mockReturnValue(true);
  });

  afterEach(() => {
    vi.useRealTimers();
    vi.restoreAllMocks();
  });

  const frame = () => vi.advanceTimersToNextFrame();
  const childRow = () => el.querySelector<HTMLElement>('[data-testid="neta-subagent"][data-request-id="r_child_b"]')!;

  it("opens the row the user opened in the view made anew, and follows the child there again", () => {
    const node = el.appendChild(document.createElement("div"));
    const first = new FakeModel({ request_id: "r_parent", mode: "embedded", prompt: "", snapshot: {} });
    mount(first, node.appendChild(document.createElement("div")));
    first.emit("msg:custom", { kind: "events", events: upTo(delegatedRun(), 5) });
    frame();
    childRow().querySelector<HTMLElement>('[data-testid="neta-subagent-toggle"]')!.click();
    expect(childRow().dataset["open"]).toBe("true");

    // The kernel updated the output at a rest: JupyterLab empties the output and mounts anew.
    node.textContent = "";
    const second = new FakeModel({ request_id: "r_parent", mode: "embedded", prompt: "", snapshot: {} });
    mount(second, node.appendChild(document.createElement("div")));
    expect(childRow().dataset["open"]).toBe("true");
    expect(second.sent).toContainEqual({ kind: "replay", lastSeq: -1, requestId: "r_child_b" });
    expect(el.querySelectorAll('[data-testid="neta-subagent-run"] [data-testid="neta-run"]')).toHaveLength(1);
  });

  it("follows the child's stream through the same comm, and approves its ask from inside the parent's view", () => {
    const model = new FakeModel({ request_id: "r_parent", mode: "embedded", prompt: "compare the files", snapshot: {} });
    const cleanup = mount(model, el);
    model.emit("msg:custom", { kind: "events", events: upTo(delegatedRun(), 5) });
    frame();

    childRow().querySelector<HTMLElement>('[data-testid="neta-subagent-toggle"]')!.click();
    expect(model.sent[model.sent.length - 1]).toEqual({ kind: "replay", lastSeq: -1, requestId: "r_child_b" });
    const child = childRun();
    model.emit("msg:custom", { kind: "events", events: upTo(child, "MESSAGE_SUSPENDED"), requestId: "r_child_b" });
    frame();
    const nested = childRow().querySelector<HTMLElement>('[data-testid="neta-subagent-run"] [data-testid="neta-run"]')!;
    expect(nested.dataset["requestId"]).toBe("r_child_b");
    expect(nested.dataset["status"]).toBe("suspended");
    // The parent's events do not reach the child's view, nor the child's the parent's.
    expect(nested.dataset["lastSeq"]).toBe("3");
    expect(root(el).dataset["lastSeq"]).toBe("5");

    vi.advanceTimersByTime(ARM_DELAY_MS);
    nested.querySelector<HTMLElement>('[data-testid="neta-approve"]')!.click();
    expect(model.sent[model.sent.length - 1]).toEqual({
      kind: "action",
      action: "resume",
      requestId: "r_child_b",
      askId: "ask_b",
      approved: true,
      always: false,
    });
    model.emit("msg:custom", { kind: "events", events: child, requestId: "r_child_b" });
    frame();
    expect(nested.dataset["status"]).toBe("completed");
    expect(nested.textContent).toContain("data.csv has 3 columns");

    // Closing the row lets the child's stream go; disposing the widget leaves nothing behind.
    childRow().querySelector<HTMLElement>('[data-testid="neta-subagent-toggle"]')!.click();
    expect(model.sent[model.sent.length - 1]).toEqual({ kind: "unsubscribe", requestId: "r_child_b" });
    cleanup();
    expect(model.listenerCount()).toBe(0);
    expect(el.children).toHaveLength(0);
  });

  it("approves a child's ask from its row without opening it", () => {
    const model = new FakeModel({ request_id: "r_parent_2", mode: "embedded", prompt: "", snapshot: {} });
    mount(model, el);
    const events = upTo(delegatedRun(), 5).map((e) => ({ ...e, requestId: "r_parent_2" }));
    model.emit("msg:custom", { kind: "events", events });
    frame();
    vi.advanceTimersByTime(ARM_DELAY_MS);
    childRow().querySelector<HTMLElement>('[data-testid="neta-always"]')!.click();
    expect(model.sent).toEqual([
      { kind: "replay", lastSeq: -1 },
      { kind: "action", action: "resume", requestId: "r_child_b", askId: "ask_b", approved: true, always: true },
    ]);
  });
});

function root(el: HTMLElement): HTMLElement {
  return el.querySelector<HTMLElement>('[data-testid="neta-run"]')!;
}
