import { describe, expect, it } from "vitest";
import { HISTORY_NOTICE, historyEvents } from "../src/history";
import { reduceAll } from "../src/reducer";
import { RunView } from "../src/view/run-view";
import { FakeClock } from "./clock";
import { IMPORTED_TREE } from "./history-tree";

describe("a past run rebuilt from its session tree", () => {
  const events = historyEvents(IMPORTED_TREE, "r_hist", { status: "completed" });
  const state = reduceAll(events);

  it("numbers its events from 0 and ends with one terminal event", () => {
    const seqs = events.map((e) => (e as { seq: number }).seq);
    expect(seqs).toEqual(seqs.map((_, i) => i));
    const types = events.map((e) => (e as { eventType: string }).eventType);
    expect(types.filter((t) => t.startsWith("MESSAGE_"))).toEqual(["MESSAGE_COMPLETED"]);
    expect(types[types.length - 1]).toBe("MESSAGE_COMPLETED");
  });

  it("has the run's cards, their outputs and failures, its timeline and its answer, and only its own", () => {
    expect(state.status).toBe("completed");
    expect(state.tools.byId["call_a"]).toMatchObject({ toolName: "run_skill", status: "completed", output: "40 rows, 4 columns", durationMs: 1830 });
    expect(state.tools.byId["call_b"]).toMatchObject({ status: "failed", errorMessage: "no such file: gone.txt" });
    expect(state.processes.order).toEqual(["op_1"]);
    expect(state.processes.byId["op_1"]).toMatchObject({ stage: "profile", status: "completed", percent: 100, toolCallId: "call_a" });
    expect(state.answer.map((s) => s.text)).toEqual(["Sales has **40** rows."]);
  });

  it("renders like a live run: tool cards, the process timeline, the answer", () => {
    document.body.replaceChildren();
    const container = document.createElement("div");
    document.body.append(container);
    const view = new RunView(container, { onAction: async () => {}, resolveUrl: () => null, clock: new FakeClock() });
    view.update(state);
    view.flush();
    expect(container.querySelectorAll('[data-testid="neta-tool-card"]')).toHaveLength(2);
    expect(container.querySelector('[data-testid="neta-process"]')?.textContent).toContain("profile");
    expect(container.querySelector('[data-testid="neta-answer"]')?.textContent).toContain("Sales has 40 rows.");
  });

  it("says it comes from history in every view drawn from its state, not only the first", () => {
    expect(state.fromHistory).toBe(true);
    for (let view = 0; view < 2; view += 1) {
      document.body.replaceChildren();
      const container = document.createElement("div");
      document.body.append(container);
      const runView = new RunView(container, { onAction: async () => {}, resolveUrl: () => null, clock: new FakeClock() });
      runView.update(state);
      runView.flush();
      const note = container.querySelector<HTMLElement>('[data-testid="neta-history-note"]');
      expect(note?.hidden).toBe(false);
      expect(note?.textContent).toBe(HISTORY_NOTICE);
    }
  });

  it("a live run says nothing of history", () => {
    const live = reduceAll([{ eventType: "SESSION_CREATED", seq: 0, requestId: "r", data: { type: "session", sessionId: "s" } }]);
    expect(live.fromHistory).toBe(false);
  });

  it("ends failed when the run failed", () => {
    const failed = reduceAll(historyEvents(IMPORTED_TREE, "r_hist", { status: "failed", errorMessage: "it broke" }));
    expect(failed.status).toBe("failed");
    expect(failed.failure).toMatchObject({ errorMessage: "it broke", recoverable: false });
  });
});
