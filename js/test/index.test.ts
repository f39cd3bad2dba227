import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import widget from "../src/index";
import { mount } from "../src/widget";
import { FakeModel } from "./fake-model";
import { SnapshotWriter, snapshotOf, stateFromSnapshot } from "../src/snapshot";
import { reduceAll } from "../src/reducer";
import { ARM_DELAY_MS, browserGuard } from "../src/view/guard";
import { fixture } from "./helpers";

let el: HTMLElement;

beforeEach(() => {
  vi.useFakeTimers();
  document.body.replaceChildren();
  el = document.createElement("div");
  document.body.append(el);
});

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

const root = () => el.querySelector<HTMLElement>('[data-testid="neta-run"]')!;
const frame = () => vi.advanceTimersToNextFrame();

describe("the anywidget entry", () => {
  it("renders once the widget's code is loaded, in a task after the one that loads the module", async () => {
    const model = new FakeModel({ request_id: "r_entry", mode: "embedded", prompt: "why?", snapshot: {} });
    let cleanup: (() => void) | null = null;
    void widget.render({ model, el }).then((done) => (cleanup = done));
    expect(el.children).toHaveLength(0);
    // One task per library, then the widget.
    for (let tasks = 0; tasks < 100 && !cleanup; tasks++) await vi.advanceTimersByTimeAsync(1);
    if (!cleanup) throw new Error("the widget did not render");
    expect(el.textContent).toContain("why?");
    expect(model.sent).toEqual([{ kind: "replay", lastSeq: -1 }]);
    (cleanup as () => void)();
    expect(el.children).toHaveLength(0);
  });
});

describe("the run widget (embedded mode)", () => {
  it("asks the kernel for a replay and renders the events it sends", () => {
    const model = new FakeModel({ request_id: "r_basic", mode: "embedded", prompt: "why?", snapshot: {} });
    const cleanup = mount(model, el);
    expect(model.sent).toEqual([{ kind: "replay", lastSeq: -1 }]);
    expect(el.textContent).toContain("why?");

    model.emit("msg:custom", { kind: "events", events: fixture("basic_run") });
    frame();
    expect(root().dataset["status"]).toBe("completed");
    expect(el.querySelector('[data-testid="neta-answer"]')?.textContent).toContain("I saved the counts");

    // The terminal event writes the snapshot at once.
    expect(model.traits["snapshot"]).toMatchObject({ requestId: "r_basic", status: "completed", lastSeq: 36 });
    expect((model.traits["snapshot"] as { finalText: string }).finalText).toContain("Column **b**");
    expect(model.saves).toBe(1);

    cleanup();
    expect(el.children).toHaveLength(0);
    expect(model.listenerCount()).toBe(0);
  });

  it("sends actions back over the comm with the requestId", () => {
    const model = new FakeModel({ request_id: "r_perm", mode: "embedded", prompt: "", snapshot: {} });
    mount(model, el);
    const events = fixture("permission_resume");
    model.emit("msg:custom", { kind: "events", events: events.slice(0, events.findIndex((e) => e.eventType === "MESSAGE_SUSPENDED") + 1) });
    frame();
    // jsdom lays nothing out, so no click of a script passes the browser's checks: let this one.
    vi.spyOn(browserGuard, "deliberate").mockReturnValue(true);
    vi.advanceTimersByTime(ARM_DELAY_MS);
    el.querySelector<HTMLElement>('[data-testid="neta-always"]')!.click();
    expect(model.sent[1]).toEqual({ kind: "action", action: "resume", requestId: "r_perm", askId: "ask_1", approved: true, always: true });
  });

  it("names what the prompt showed when it approves, so a changed call is asked about again", () => {
    // A run of its own: the page keeps what it saw of the runs the tests above showed.
    const model = new FakeModel({ request_id: "r_bound", mode: "embedded", prompt: "", snapshot: {} });
    mount(model, el);
    const events = fixture("permission_resume").map((e) => ({ ...e, requestId: "r_bound" }));
    const upTo = events.slice(0, events.findIndex((e) => e.eventType === "MESSAGE_SUSPENDED") + 1);
    const shown = upTo.map((e) =>
      e.eventType === "PERMISSION_ASK" ? { ...e, data: { ...(e.data as object), digest: "d1" } } : e,
    );
    model.emit("msg:custom", { kind: "events", events: shown });
    frame();
    vi.spyOn(browserGuard, "deliberate").mockReturnValue(true);
    vi.advanceTimersByTime(ARM_DELAY_MS);
    el.querySelector<HTMLElement>('[data-testid="neta-approve"]')!.click();
    expect(model.sent[1]).toEqual({
      kind: "action",
      action: "resume",
      requestId: "r_bound",
      askId: "ask_1",
      approved: true,
      always: false,
      digest: "d1",
    });
  });

  it("shows the saved snapshot until live events arrive", () => {
    const snapshot = { requestId: "r_old", status: "completed", finalText: "The **saved** answer", lastSeq: 12 };
    const model = new FakeModel({ request_id: "r_old", mode: "server", prompt: "", snapshot });
    mount(model, el); // no Jupyter page config here: falls back to the comm
    expect(el.querySelector('[data-testid="neta-answer"] strong')?.textContent).toBe("saved");
    frame();
    expect(el.querySelector('[data-testid="neta-answer"] strong')?.textContent).toBe("saved");
    expect(root().dataset["status"]).toBe("completed");
    expect(model.saves).toBe(0);
  });

  it("starts over when request_id changes", () => {
    const model = new FakeModel({ request_id: "", mode: "embedded", prompt: "", snapshot: {} });
    mount(model, el);
    model.emit("msg:custom", { kind: "events", events: fixture("max_steps") });
    frame();
    model.set("request_id", "r_not_seen_yet");
    frame();
    expect(root().dataset["lastSeq"]).toBe("-1");
    expect(model.sent[model.sent.length - 1]).toEqual({ kind: "replay", lastSeq: -1 });
  });

  it("gives a new view of a run the page has seen the state the last view reached, without a replay", () => {
    const events = fixture("permission_resume");
    const suspended = events.findIndex((e) => e.eventType === "MESSAGE_SUSPENDED") + 1;
    const first = new FakeModel({ request_id: "r_perm_again", mode: "embedded", prompt: "", snapshot: {} });
    const dispose = mount(first, el);
    const renamed = (list: typeof events) => list.map((e) => ({ ...e, requestId: "r_perm_again" }));
    first.emit("msg:custom", { kind: "events", events: renamed(events.slice(0, suspended)) });
    frame();
    const answer = el.querySelector('[data-testid="neta-run"]')?.textContent;
    dispose();

    // The kernel refreshed the output: a new view, as JupyterLab makes it (a new model proxy).
    const second = new FakeModel({ request_id: "r_perm_again", mode: "embedded", prompt: "", snapshot: {} });
    const disposeSecond = mount(second, el);
    // At once, before any frame: the view that takes the last one's place is never blank.
    expect(root().textContent).toBe(answer);
    expect(root().dataset["status"]).toBe("suspended");
    frame();
    expect(root().textContent).toBe(answer);
    expect(second.sent).toEqual([{ kind: "replay", lastSeq: suspended - 1 }]);
    second.emit("msg:custom", { kind: "events", events: renamed(events.slice(suspended)) });
    frame();
    expect(root().dataset["status"]).toBe("completed");
    disposeSecond();
    expect(el.children).toHaveLength(0);

    // A run that has ended is not followed again.
    const third = new FakeModel({ request_id: "r_perm_again", mode: "embedded", prompt: "", snapshot: {} });
    mount(third, el);
    frame();
    expect(root().dataset["status"]).toBe("completed");
    expect(third.sent).toEqual([]);
  });
});

describe("views JupyterLab replaces", () => {
  const suspendedRun = () => {
    const events = fixture("permission_resume");
    const end = events.findIndex((e) => e.eventType === "MESSAGE_SUSPENDED") + 1;
    return events.slice(0, end).map((e) => ({ ...e, requestId: "r_replaced" }));
  };
  const traits = { request_id: "r_replaced", mode: "embedded", prompt: "", snapshot: {} };

  /** A view of the run in its own output node, on the page, with events shown. */
  function shownView(): { model: FakeModel; node: HTMLElement; el: HTMLElement } {
    const node = document.createElement("div");
    const viewEl = document.createElement("div");
    node.append(viewEl);
    el.append(node);
    const model = new FakeModel(traits);
    mount(model, viewEl);
    model.emit("msg:custom", { kind: "events", events: suspendedRun() });
    return { model, node, el: viewEl };
  }

  it("disposes the view whose place the next view of the run took, so it follows the run no more", () => {
    const first = shownView();
    // The kernel updated the output at the rest: the renderer empties its node, then mounts anew.
    first.node.textContent = "Loading widget...";
    const second = new FakeModel(traits);
    const next = document.createElement("div");
    first.node.replaceChildren(next);
    mount(second, next);
    expect(first.model.listenerCount()).toBe(0);
    expect(first.el.children).toHaveLength(0);
    expect(second.listenerCount()).toBeGreaterThan(0);
    expect(next.querySelector('[data-testid="neta-run"]')).not.toBeNull();
  });

  it("gives the view made anew the folds the user chose, and leaves the others as the view makes them", () => {
    const longOutput = Array.from({ length: 40 }, (_, i) => `row ${i}`).join("\n");
    const events = fixture("basic_run").map((e) =>
      e.eventType === "TOOL_COMPLETED" ? { ...e, requestId: "r_folds", data: { ...e.data, output: longOutput } } : { ...e, requestId: "r_folds" },
    );
    const node = el.appendChild(document.createElement("div"));
    const first = new FakeModel({ ...traits, request_id: "r_folds" });
    mount(first, node.appendChild(document.createElement("div")));
    first.emit("msg:custom", { kind: "events", events });
    frame();
    const details = (testid: string) => node.querySelector<HTMLDetailsElement>(`[data-testid="${testid}"]`)!;
    const output = () => node.querySelector<HTMLDetailsElement>(".neta-tool-output-long")!;
    const args = () => node.querySelector<HTMLDetailsElement>(".neta-tool-args")!;
    expect([output().open, args().open, details("neta-reasoning").open]).toEqual([false, true, false]);
    output().querySelector("summary")!.click(); // opened by the user
    args().querySelector("summary")!.click(); // folded by the user
    expect([output().open, args().open]).toEqual([true, false]);

    node.textContent = "Loading widget...";
    const second = new FakeModel({ ...traits, request_id: "r_folds" });
    mount(second, node.appendChild(document.createElement("div")));
    expect(first.listenerCount()).toBe(0);
    expect([output().open, args().open, details("neta-reasoning").open]).toEqual([true, false, false]);
  });

  it("keeps a view scrolled out of a windowed notebook, a second view on the page, and a view not yet shown", () => {
    const scrolledOut = shownView();
    scrolledOut.node.remove(); // the cell left the page; the view is still in its output node
    const beside = shownView();
    const notYetShown = new FakeModel(traits);
    mount(notYetShown, document.createElement("div"));
    const another = new FakeModel(traits);
    mount(another, el.appendChild(document.createElement("div")));
    for (const model of [scrolledOut.model, beside.model, notYetShown, another]) {
      expect(model.listenerCount()).toBeGreaterThan(0);
    }
  });
});

describe("snapshot", () => {
  it("round-trips the final text and status", () => {
    const state = reduceAll(fixture("failed_recoverable"));
    const snapshot = snapshotOf(state);
    expect(snapshot).toEqual({
      requestId: "r_fail",
      status: "failed",
      finalText: "Let me look",
      lastSeq: 4,
      errorMessage: "The model did not answer in time",
    });
    const shown = stateFromSnapshot(snapshot);
    expect(shown?.answer[0]?.text).toBe("Let me look");
    expect(shown?.failure?.errorMessage).toBe("The model did not answer in time");
    expect(stateFromSnapshot({})).toBeNull();
    expect(stateFromSnapshot(null)).toBeNull();
  });

  it("keeps why a suspended run waits, so a reload labels it right from the first frame", () => {
    const events = fixture("permission_resume");
    const suspended = reduceAll(events.slice(0, events.findIndex((e) => e.eventType === "MESSAGE_SUSPENDED") + 1));
    const snapshot = snapshotOf(suspended);
    expect(snapshot.suspendReason).toBe("PERMISSION_ASK");
    for (const [n, saved] of [snapshot, { ...snapshot, suspendReason: undefined }].entries()) {
      // A run of its own each time: the page remembers the last state of runs it has shown.
      const requestId = `r_reload_${n}`;
      const replay = events.map((e) => ({ ...e, requestId }));
      const model = new FakeModel({ request_id: requestId, mode: "embedded", prompt: "", snapshot: { ...saved, requestId } });
      document.body.replaceChildren(el);
      el.replaceChildren();
      mount(model, el);
      const labels: string[] = [];
      const record = () => {
        const label = el.querySelector('[data-testid="neta-status"]')?.textContent ?? "";
        if (label && labels[labels.length - 1] !== label) labels.push(label);
      };
      frame();
      record();
      model.emit("msg:custom", { kind: "events", events: replay.slice(0, replay.findIndex((e) => e.eventType === "MESSAGE_SUSPENDED") + 1) });
      frame();
      record();
      // A summary saved without the reason (the kernel writes one too) says less, but nothing wrong.
      expect(labels).toEqual(saved.suspendReason ? ["Waiting for your approval"] : ["Waiting", "Waiting for your approval"]);
    }
  });

  it("is written at most once per interval while running, and in the next task at rest", () => {
    const writes: unknown[] = [];
    const writer = new SnapshotWriter((s) => writes.push(s), { setTimeout, clearTimeout }, 1000);
    const events = fixture("basic_run");
    for (let i = 1; i < events.length; i++) writer.push(reduceAll(events.slice(0, i)));
    expect(writes).toHaveLength(0);
    vi.advanceTimersByTime(1000);
    expect(writes).toHaveLength(1);
    writer.push(reduceAll(events));
    expect(writes).toHaveLength(1);
    vi.advanceTimersByTime(0);
    expect(writes).toHaveLength(2);
    expect(writes[1]).toMatchObject({ status: "completed" });
    // Nothing new: nothing written.
    writer.push(reduceAll(events));
    vi.advanceTimersByTime(5000);
    writer.dispose();
    expect(writes).toHaveLength(2);
  });
});
