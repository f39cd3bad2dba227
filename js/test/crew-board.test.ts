import { describe, expect, it } from "vitest";

import { readBoard } from "../src/crew-board";

describe("readBoard", () => {
  it("keeps what it knows and drops what is malformed", () => {
    const board = readBoard({
      name: "files",
      status: "waiting",
      tasks: [{ taskId: "one", status: "waiting_approval", attempt: "x", tokens: 12 }, "junk"],
      escalations: [{ escalationId: "esc_1", taskId: "one", kind: "approval_before", message: "<b>approve</b>" }],
      log: ["a", 3],
    });
    expect(board.status).toBe("waiting");
    expect(board.tasks[0]).toEqual({
      taskId: "one",
      agent: "",
      status: "waiting_approval",
      attempt: 0,
      tokens: 12,
      childRequestId: "",
    });
    expect(board.tasks[1]?.status).toBe("pending");
    expect(board.escalations[0]?.message).toBe("<b>approve</b>");
    expect(board.log).toEqual(["a", "3"]);
  });

  it("reads nothing as an empty queued board", () => {
    expect(readBoard(null)).toEqual({ name: "", mode: "", status: "queued", message: "", tasks: [], escalations: [], log: [] });
  });
});

describe("the board view", () => {
  it("shows agents' text as text and sends a click's decision to the kernel", async () => {
    const { default: widget } = await import("../src/crew-board");
    const sent: Record<string, unknown>[] = [];
    const listeners: (() => void)[] = [];
    let board: unknown = {
      name: "files",
      status: "waiting",
      tasks: [{ taskId: "one", status: "waiting_approval" }],
      escalations: [{ escalationId: "esc_1", taskId: "one", kind: "approval_before", message: "<img src=x onerror=alert(1)>" }],
      log: [],
    };
    const model = {
      get: () => board,
      on: (_name: string, callback: () => void) => listeners.push(callback),
      off: () => undefined,
      send: (content: Record<string, unknown>) => sent.push(content),
    };
    const el = document.createElement("div");
    widget.render({ model, el });
    expect(el.querySelector("img")).toBeNull();
    expect(el.querySelector("[data-testid=neta-crew-escalation]")?.textContent).toContain("<img src=x");
    (el.querySelector("[data-testid=neta-crew-approve]") as HTMLButtonElement).click();
    expect(sent).toEqual([{ type: "decide", escalationId: "esc_1", decision: "answer", approved: true }]);
    board = { name: "files", status: "completed", tasks: [{ taskId: "one", status: "completed" }] };
    for (const listener of listeners) listener();
    expect(el.querySelector("[data-testid=neta-crew]")?.getAttribute("data-status")).toBe("completed");
    expect(el.querySelector("[data-testid=neta-crew-pause]")).toBeNull();
  });
});

describe("a question on the board", () => {
  it("sends the typed answer", async () => {
    const { default: widget } = await import("../src/crew-board");
    const sent: Record<string, unknown>[] = [];
    const board = {
      name: "files",
      status: "waiting",
      tasks: [{ taskId: "one", status: "waiting_approval", tokens: 1200 }],
      escalations: [{ escalationId: "esc_2", taskId: "one", kind: "question", message: "which table?" }],
    };
    const model = { get: () => board, on: () => undefined, off: () => undefined, send: (c: Record<string, unknown>) => sent.push(c) };
    const el = document.createElement("div");
    widget.render({ model, el });
    expect(el.querySelector("[data-testid=neta-crew-status]")?.textContent).toContain("1,200 tokens");
    (el.querySelector("[data-testid=neta-crew-answer]") as HTMLInputElement).value = "sales";
    (el.querySelector("[data-testid=neta-crew-send-answer]") as HTMLButtonElement).click();
    expect(sent).toEqual([{ type: "decide", escalationId: "esc_2", decision: "answer", answer: "sales" }]);
  });
});

describe("an answer being typed on the board", () => {
  it("stays, with its focus, while the board redraws", async () => {
    const { default: widget } = await import("../src/crew-board");
    const listeners: (() => void)[] = [];
    const escalation = { escalationId: "esc_3", taskId: "one", kind: "question", message: "which table?" };
    let board: unknown = { name: "files", status: "waiting", tasks: [{ taskId: "one" }], escalations: [escalation], log: [] };
    const model = {
      get: () => board,
      on: (_name: string, callback: () => void) => listeners.push(callback),
      off: () => undefined,
      send: () => undefined,
    };
    const el = document.createElement("div");
    document.body.append(el);
    widget.render({ model, el });
    const answer = el.querySelector<HTMLInputElement>("[data-testid=neta-crew-answer]")!;
    answer.focus();
    answer.value = "sal";
    board = { name: "files", status: "waiting", tasks: [{ taskId: "one" }], escalations: [escalation], log: ["two: step 2"] };
    for (const listener of listeners) listener();
    expect(el.querySelector("[data-testid=neta-crew-log]")?.textContent).toBe("two: step 2");
    expect(el.querySelector<HTMLInputElement>("[data-testid=neta-crew-answer]")?.value).toBe("sal");
    expect(document.activeElement).toBe(answer);
    board = { name: "files", status: "running", tasks: [{ taskId: "one" }], escalations: [], log: [] };
    for (const listener of listeners) listener();
    expect(el.querySelector("[data-testid=neta-crew-escalations]")).toBeNull();
    el.remove();
  });
});
