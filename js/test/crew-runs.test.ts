import { afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";

import widget from "../src/crew-board";
import { FakeModel } from "./fake-model";
import { envelope, type Envelope } from "./helpers";

/** A task's run that answers with markup a model wrote. */
function taskRun(requestId: string, answer: string): Envelope[] {
  const e = (eventType: string, seq: number, data: Record<string, unknown>) => envelope(eventType, seq, data, requestId);
  return [
    e("SESSION_CREATED", 0, { type: "session", sessionId: "s_1" }),
    e("TEXT_START", 1, { type: "text", text: answer }),
    e("TEXT_END", 2, { type: "text" }),
    e("MESSAGE_COMPLETED", 3, { type: "message", finishReason: "STOP" }),
  ];
}

function board(tasks: Record<string, unknown>[], log: string[] = []): Record<string, unknown> {
  return { name: "files", mode: "embedded", status: "running", tasks, escalations: [], log };
}

describe("a crew task opened into its run", () => {
  // The board loads the run view when a task is first opened; loaded here once, the waits below
  // are for the view's stream, not for compiling its modules on a busy machine.
  beforeAll(async () => {
    await import("../src/live-run");
  });

  let model: FakeModel;
  let el: HTMLElement;
  let cleanup: () => void;

  beforeEach(() => {
    document.body.replaceChildren();
    el = document.createElement("div");
    document.body.append(el);
    model = new FakeModel({ board: board([{ taskId: "one", status: "running", attempt: 1, childRequestId: "r_one_1" }]) });
    cleanup = widget.render({ model, el });
  });

  afterEach(() => cleanup());

  const expand = () => el.querySelector<HTMLButtonElement>('[data-testid=neta-crew-task][data-task=one] [data-testid=neta-crew-expand]')!;
  const runView = () => el.querySelector<HTMLElement>('[data-testid=neta-crew-task-run][data-task=one] [data-testid=neta-run]');
  const last = () => model.sent[model.sent.length - 1];
  const setBoard = (value: Record<string, unknown>) => model.set("board", value);

  it("follows the task's run through the comm, shows its answer sanitised, and lets it go when closed", async () => {
    expect(expand().getAttribute("aria-expanded")).toBe("false");
    expand().click();
    expect(expand().getAttribute("aria-expanded")).toBe("true");
    await vi.waitFor(() => expect(last()).toEqual({ kind: "replay", lastSeq: -1, requestId: "r_one_1" }));
    model.emit("msg:custom", { kind: "events", events: taskRun("r_one_1", "<img src=x onerror=alert(1)>sales has **3** rows"), requestId: "r_one_1" });
    await vi.waitFor(() => expect(runView()?.dataset["status"]).toBe("completed"));
    const view = runView()!;
    expect(view.dataset["requestId"]).toBe("r_one_1");
    expect(view.textContent).toContain("sales has 3 rows");
    expect(view.querySelector("strong")?.textContent).toBe("3");
    expect(el.querySelector("img[onerror]")).toBeNull();

    // The board redraws as the crew's log goes on: the open run stays the same view, not followed again.
    const sends = model.sent.length;
    setBoard(board([{ taskId: "one", status: "completed", attempt: 1, childRequestId: "r_one_1" }], ["one: done"]));
    expect(runView()).toBe(view);
    expect(model.sent.length).toBe(sends);

    expand().click();
    expect(last()).toEqual({ kind: "unsubscribe", requestId: "r_one_1" });
    expect(el.querySelector("[data-testid=neta-crew-task-run]")).toBeNull();
    expect(expand().getAttribute("aria-expanded")).toBe("false");
  });

  it("switches to a retried task's new attempt, and leaves the old attempt's stream", async () => {
    setBoard(board([{ taskId: "one", status: "running", attempt: 1, childRequestId: "r_two_1" }]));
    expand().click();
    await vi.waitFor(() => expect(last()).toEqual({ kind: "replay", lastSeq: -1, requestId: "r_two_1" }));
    model.emit("msg:custom", { kind: "events", events: taskRun("r_two_1", "first try").slice(0, 2), requestId: "r_two_1" });
    await vi.waitFor(() => expect(runView()?.textContent).toContain("first try"));

    setBoard(board([{ taskId: "one", status: "running", attempt: 2, childRequestId: "r_two_2" }]));
    expect(model.sent).toContainEqual({ kind: "unsubscribe", requestId: "r_two_1" });
    await vi.waitFor(() => expect(last()).toEqual({ kind: "replay", lastSeq: -1, requestId: "r_two_2" }));
    model.emit("msg:custom", { kind: "events", events: taskRun("r_two_1", "late words of the first"), requestId: "r_two_1" });
    model.emit("msg:custom", { kind: "events", events: taskRun("r_two_2", "second try worked"), requestId: "r_two_2" });
    await vi.waitFor(() => expect(runView()?.dataset["status"]).toBe("completed"));
    expect(runView()!.dataset["requestId"]).toBe("r_two_2");
    expect(runView()!.textContent).toContain("second try worked");
    expect(el.textContent).not.toContain("first try");
    expect(el.querySelectorAll("[data-testid=neta-run]")).toHaveLength(1);
  });

  it("keeps the open run in place while the board redraws, with the focus of what is in it", async () => {
    setBoard(board([{ taskId: "one", status: "running", attempt: 1, childRequestId: "r_four_1" }]));
    expand().click();
    await vi.waitFor(() => expect(last()).toEqual({ kind: "replay", lastSeq: -1, requestId: "r_four_1" }));
    model.emit("msg:custom", { kind: "events", events: taskRun("r_four_1", "still writing").slice(0, 2), requestId: "r_four_1" });
    await vi.waitFor(() => expect(runView()?.textContent).toContain("still writing"));
    const control = runView()!.querySelector<HTMLElement>("button, textarea, input")!;
    control.focus();
    expect(document.activeElement).toBe(control);
    setBoard(board([{ taskId: "one", status: "running", attempt: 1, childRequestId: "r_four_1", tokens: 40 }], ["one: step 1"]));
    expect(el.querySelector("[data-testid=neta-crew-log]")?.textContent).toBe("one: step 1");
    expect(document.activeElement).toBe(control);
  });

  it("opens a task with no run yet, and follows its run once it starts; closing the board ends it", async () => {
    setBoard(board([{ taskId: "one", status: "pending" }]));
    expand().click();
    expect(el.querySelector("[data-testid=neta-crew-run]")?.textContent).toContain("no run yet");
    setBoard(board([{ taskId: "one", status: "running", attempt: 1, childRequestId: "r_three_1" }]));
    await vi.waitFor(() => expect(last()).toEqual({ kind: "replay", lastSeq: -1, requestId: "r_three_1" }));
    cleanup();
    expect(last()).toEqual({ kind: "unsubscribe", requestId: "r_three_1" });
    cleanup = () => undefined;
  });
});
