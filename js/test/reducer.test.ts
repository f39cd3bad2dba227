import { describe, expect, it } from "vitest";
import { reduce, reduceAll } from "../src/reducer";
import { finalText, initialState, valuesOf, type RunState } from "../src/state";
import { statusLabel } from "../src/view/format";
import { EVENT_TYPES } from "../src/wire";
import { FIXTURES, envelope, fixture, type Envelope } from "./helpers";

function until(events: Envelope[], eventType: string, nth = 1): Envelope[] {
  let seen = 0;
  const index = events.findIndex((e) => e.eventType === eventType && ++seen === nth);
  if (index < 0) throw new Error(`no ${eventType}`);
  return events.slice(0, index + 1);
}

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null) {
    Object.values(value).forEach(deepFreeze);
    Object.freeze(value);
  }
  return value;
}

describe("fixtures", () => {
  it.each(FIXTURES)("%s has contiguous seqs from 0 and ends with one terminal event", (name) => {
    const events = fixture(name);
    const seqs = events.flatMap((e) => (e.seq === undefined ? [] : [e.seq]));
    expect(seqs).toEqual(seqs.map((_, i) => i));
    expect(events[events.length - 1]?.eventType).toMatch(/^MESSAGE_(COMPLETED|FAILED)$/);
  });

  it("cover every event type of the catalogue", () => {
    const seen = new Set(FIXTURES.flatMap((name) => fixture(name).map((e) => e.eventType)));
    expect([...EVENT_TYPES].filter((t) => !seen.has(t))).toEqual([]);
  });
});

describe("a run with reasoning, a tool call, an attachment and an answer (seed 003 §7)", () => {
  const events = fixture("basic_run");
  const state = reduceAll(events);

  it("ends completed with every seq applied", () => {
    expect(state.status).toBe("completed");
    expect(state.requestId).toBe("r_basic");
    expect(state.sessionId).toBe("s_1");
    expect(state.lastSeq).toBe(events.filter((e) => e.seq !== undefined).length - 1);
    expect(state.finishReason).toBe("STOP");
    expect(state.step).toBe(2);
    expect(state.totalTokens).toBe(2310);
  });

  it("keeps reasoning apart from the answer", () => {
    expect(state.reasoning).toEqual([
      { text: "The user wants missing values per column. I should inspect df first.", open: false, synthetic: false },
    ]);
    expect(state.answer).toHaveLength(1);
    expect(state.answer[0]?.text).toBe(
      "Column **b** has the most missing values (12).\n\n```python\ndf['b'].isna().sum()\n```\n\nI saved the counts to `missing.csv`.",
    );
    expect(state.answer[0]?.open).toBe(false);
  });

  it("streams tool arguments, then replaces them with TOOL_START's", () => {
    const generating = reduceAll(until(events, "TOOL_CALL_GENERATING", 4));
    const card = generating.tools.byId["call_1"];
    expect(card?.status).toBe("generating");
    expect(card?.toolName).toBe("python");
    expect('{"code": "df.isna().sum()"}'.startsWith(card?.argsText ?? "x")).toBe(true);

    const tampered = events.map((e) =>
      e.eventType === "TOOL_START" ? { ...e, data: { ...e.data, arguments: '{"code": "1"}' } } : e,
    );
    expect(reduceAll(tampered).tools.byId["call_1"]?.argsText).toBe('{"code": "1"}');
  });

  it("fills the tool card through running to completed", () => {
    const running = reduceAll(until(events, "TOOL_RUNNING"));
    expect(running.tools.byId["call_1"]).toMatchObject({ status: "running", title: "Running code in the kernel" });
    expect(state.tools.order).toEqual(["call_1"]);
    expect(state.tools.byId["call_1"]).toMatchObject({
      toolName: "python",
      argsText: '{"code": "df.isna().sum()"}',
      status: "completed",
      output: "a     0\nb    12\nc     3\ndtype: int64",
      durationMs: 412,
      images: ["/sessions/s_1/plot_1.png"],
      truncated: false,
    });
  });

  it("shows AGENT_STATUS as a toast until the next tool event, never in the answer", () => {
    const atStatus = reduceAll(until(events, "AGENT_STATUS"));
    expect(atStatus.toast).toMatchObject({ code: "LLM_RATE_LIMITED", level: "WARN", message: "Rate limited, retrying (1/3)" });
    expect(reduceAll(until(events, "TOOL_RUNNING")).toast).toBeNull();
    expect(finalText(state)).not.toContain("Rate limited");
    expect(state.toast).toBeNull();
  });

  it("records the attachment, the consumed input and the usage", () => {
    expect(valuesOf(state.attachments)).toEqual([
      expect.objectContaining({ attachmentId: "att_1", fileName: "missing.csv", virtualPath: "/sessions/s_1/missing.csv", sent: false }),
    ]);
    expect(state.inputsConsumed).toEqual([{ inputId: "in_1", content: "also plot it" }]);
    expect(state.usage).toEqual({ promptTokens: 2000, completionTokens: 310, cachedTokens: 500, reasoningTokens: 40, totalTokens: 2310 });
  });

  it("applies each event exactly once: replaying the stream changes nothing", () => {
    expect(reduceAll(events, state)).toBe(state);
    const doubled = events.flatMap((e) => [e, e]);
    expect(reduceAll(doubled)).toEqual(state);
  });

  it("drops events that arrive out of order", () => {
    const swapped = [...events];
    const i = swapped.findIndex((e) => e.eventType === "TEXT_DELTA");
    [swapped[i], swapped[i + 1]] = [swapped[i + 1]!, swapped[i]!];
    const text = reduceAll(swapped).answer[0]?.text ?? "";
    const original = state.answer[0]?.text ?? "";
    // The later delta was applied, the earlier one (now arriving late) was dropped.
    expect(text.length).toBeLessThan(original.length);
    expect(reduce(state, { ...events[3]!, data: { type: "reasoning", text: "late" } })).toBe(state);
  });

  it("never mutates the state it is given", () => {
    let current = deepFreeze(initialState());
    for (const event of events) current = deepFreeze(reduce(current, event));
    expect(current).toEqual(state);
  });

  it("shares what did not change", () => {
    const before = reduceAll(until(events, "TEXT_START"));
    const after = reduce(before, envelope("TEXT_DELTA", before.lastSeq + 1, { type: "text", text: "x" }, "r_basic"));
    expect(after.tools).toBe(before.tools);
    expect(after.reasoning).toBe(before.reasoning);
    expect(after.attachments).toBe(before.attachments);
    expect(after.answer).not.toBe(before.answer);
  });
});

describe("HEARTBEAT and events without a seq", () => {
  it("change nothing", () => {
    const state = reduceAll(fixture("basic_run").slice(0, 5));
    expect(reduce(state, { eventType: "HEARTBEAT", requestId: "r_basic", data: { type: "heartbeat" } })).toBe(state);
    expect(reduce(state, envelope("TEXT_DELTA", undefined, { type: "text", text: "x" }, "r_basic"))).toBe(state);
  });
});

describe("a permission ask, a suspension and the resumed run", () => {
  const events = fixture("permission_resume");

  it("suspends with the pending ask", () => {
    const suspended = reduceAll(until(events, "MESSAGE_SUSPENDED"));
    expect(suspended.status).toBe("suspended");
    expect(suspended.permission).toEqual({
      askId: "ask_1",
      toolName: "python",
      toolCallId: "call_p",
      arguments: '{"code": "import os\\nos.remove(\'data.csv\')"}',
      ruleDescription: "Running code in your kernel needs your approval",
      rulePattern: "python(*)",
    });
    expect(suspended.suspendReason).toEqual({ type: "PERMISSION_ASK", askId: "ask_1", message: "Waiting for approval" });
  });

  it("keeps the ask while the run has not moved on", () => {
    const ask = reduceAll(until(events, "PERMISSION_ASK"));
    const status = envelope("AGENT_STATUS", ask.lastSeq + 1, { type: "agent_status", code: "X", message: "m" }, "r_perm");
    expect(reduce(ask, status).permission?.askId).toBe("ask_1");
  });

  it("resumes under the same requestId with later seqs", () => {
    const resolved = reduceAll(until(events, "PERMISSION_ASK_RESOLVED"));
    expect(resolved.status).toBe("running");
    expect(resolved.permission).toBeNull();
    expect(resolved.suspendReason).toBeNull();
    const done = reduceAll(events);
    expect(done.status).toBe("completed");
    expect(finalText(done)).toBe("Removed `data.csv`.");
    expect(done.tools.byId["call_p"]?.status).toBe("completed");
  });

  it("clears the ask when the run continues even without PERMISSION_ASK_RESOLVED", () => {
    const withoutResolved = events.filter((e) => e.eventType !== "PERMISSION_ASK_RESOLVED");
    const running = reduceAll(until(withoutResolved, "TOOL_RUNNING"));
    expect(running.status).toBe("running");
    expect(running.permission).toBeNull();
  });

  it("accepts the resumed part delivered by a second subscription", () => {
    const cut = events.findIndex((e) => e.eventType === "MESSAGE_SUSPENDED") + 1;
    const first = reduceAll(events.slice(0, cut));
    // A resubscription from lastEventId may repeat the tail of what was seen: harmless.
    const second = reduceAll(events.slice(cut - 2), first);
    expect(second).toEqual(reduceAll(events));
  });
});

describe("a recoverable failure", () => {
  const events = fixture("failed_recoverable");
  const state = reduceAll(events);

  it("records the failure and closes the open text", () => {
    expect(state.status).toBe("failed");
    expect(state.failure).toEqual({
      errorCode: "LLM_ERROR",
      errorMessage: "The model did not answer in time",
      recoverable: true,
      networkError: true,
    });
    expect(state.answer).toEqual([{ text: "Let me look", open: false, synthetic: false }]);
    expect(state.usage?.promptTokens).toBe(0);
    expect(state.toast).toBeNull();
  });

  it("runs again after a retry continues the same requestId", () => {
    const retried = reduce(state, envelope("TEXT_START", state.lastSeq + 1, { type: "text", text: "Again" }, "r_fail"));
    expect(retried.status).toBe("running");
    expect(retried.failure).toBeNull();
    expect(retried.answer.map((s) => s.text)).toEqual(["Let me look", "Again"]);
  });
});

describe("process events", () => {
  const state = reduceAll(fixture("process_nested"));

  it("keeps one entry per operation, in first-seen order, with the latest fields", () => {
    expect(state.processes.order).toEqual(["op_root", "op_cols", "op_corr", "op_corr_1"]);
    expect(state.processes.byId["op_cols"]).toMatchObject({
      parentOperationId: "op_root",
      stage: "columns",
      status: "completed",
      current: 4,
      total: 4,
      percent: 100,
    });
    expect(state.processes.byId["op_corr"]).toMatchObject({ status: "completed", message: "Many columns; sampling" });
    expect(state.processes.byId["op_corr_1"]?.parentOperationId).toBe("op_corr");
    expect(state.processes.byId["op_root"]).toMatchObject({ status: "completed", percent: 100, message: "Profiling df" });
  });

  it("tracks the skill lifecycle", () => {
    expect(state.skills.byId["profile"]?.state).toBe("inactive");
    expect(state.tools.byId["call_s"]?.durationMs).toBe(5321);
  });
});

describe("a reply cut off and taken up again (a server restart mid-answer)", () => {
  const cut = [
    envelope("TEXT_START", 0, { type: "text" }),
    envelope("TEXT_DELTA", 1, { type: "text", text: "The answer " }),
    envelope("TEXT_END", 2, { type: "text" }),
    envelope("MESSAGE_SUSPENDED", 3, { type: "message", suspendReason: { type: "SHUTDOWN_INTERRUPT" } }),
  ];

  it("continues the segment it was cut off in: the answer shows once, in one piece", () => {
    const state = reduceAll([
      ...cut,
      envelope("TEXT_START", 4, { type: "text", continues: true }),
      envelope("TEXT_DELTA", 5, { type: "text", text: "is 42." }),
      envelope("TEXT_END", 6, { type: "text" }),
    ]);
    expect(state.answer).toEqual([{ text: "The answer is 42.", open: false, synthetic: false }]);
  });

  it("drops the cut-off text when the reply came out differently", () => {
    const state = reduceAll([
      ...cut,
      envelope("TEXT_START", 4, { type: "text", replaces: true }),
      envelope("TEXT_DELTA", 5, { type: "text", text: "It is 42." }),
    ]);
    expect(finalText(state)).toBe("It is 42.");
  });

  it("works for reasoning too, and only on the segment before", () => {
    const state = reduceAll([
      envelope("REASONING_START", 0, { type: "reasoning", text: "First " }),
      envelope("REASONING_END", 1, { type: "reasoning" }),
      envelope("REASONING_START", 2, { type: "reasoning", text: "then" }),
      envelope("REASONING_END", 3, { type: "reasoning" }),
      envelope("REASONING_START", 4, { type: "reasoning", text: " more", continues: true }),
    ]);
    expect(state.reasoning.map((s) => s.text)).toEqual(["First ", "then more"]);
  });
});

describe("the step limit", () => {
  const state = reduceAll(fixture("max_steps"));

  it("shows the synthetic text once and keeps the finish message out of the answer", () => {
    expect(state.finishReason).toBe("MAX_STEPS");
    expect(state.finishMessage).toBe("Reached the maximum of 2 steps");
    expect(state.answer).toEqual([{ text: "I stopped after reaching the step limit (2 steps).", open: false, synthetic: true }]);
    expect(finalText(state)).not.toContain("Reached the maximum");
    expect(state.tools.order).toEqual(["call_m0", "call_m1"]);
  });
});

describe("the rest of the catalogue", () => {
  const events = fixture("catalogue_rest");
  const state = reduceAll(events);

  it("records compaction, token usage, todos, skills and sub-agents", () => {
    expect(reduceAll(until(events, "COMPACTION_APPLIED")).compaction).toMatchObject({ phase: "applied", tokensBefore: 9000, tokensAfter: 2500 });
    expect(state.compaction).toMatchObject({ phase: "error", errorMessage: "Summary model failed" });
    expect(state.usage).toEqual({ promptTokens: 2500, completionTokens: 120, cachedTokens: 1000, reasoningTokens: 0, totalTokens: 2620 });
    expect(state.todos).toEqual([
      { id: "t1", content: "Load data", status: "completed" },
      { id: "t2", content: "Plot", status: "in_progress" },
    ]);
    expect(state.skills.byId["geo"]).toEqual({ name: "geo", state: "missing", message: "Skill geo is not installed" });
    expect(state.subagents.byId["b1"]).toEqual({ batchId: "b1", done: true, status: "completed", message: "1 result", events: 1, children: [] });
  });

  it("handles a failed tool and its side events, ignoring unknown categories", () => {
    expect(state.tools.byId["call_f"]).toMatchObject({
      status: "failed",
      errorMessage: "Path is outside the server root",
      notices: [{ category: "auth_required", message: "Sign in to read this file" }],
      streamed: "partial ",
    });
  });

  it("asks a clarifying question and clears it when the run goes on", () => {
    const asked = reduceAll(until(events, "MESSAGE_SUSPENDED"));
    expect(asked.status).toBe("suspended");
    expect(asked.clarify).toEqual({ clarifyId: "cl_1", question: "Which column should I plot?", options: ["a", "b"] });
    expect(asked.suspendReason?.type).toBe("CLARIFY_REQUEST");
    const resumed = reduceAll(until(events, "SESSION_ENTRY_UPDATED"));
    expect(resumed.status).toBe("running");
    expect(resumed.clarify).toBeNull();
  });

  it("lets the latest change of an attachment win", () => {
    expect(valuesOf(state.attachments)).toEqual([
      expect.objectContaining({ attachmentId: "att_2", fileSize: 4000, changeType: "UPDATED", sent: true }),
    ]);
  });

  it("ends failed, not recoverable", () => {
    expect(state.status).toBe("failed");
    expect(state.failure).toMatchObject({ errorCode: "USER_CANCELLED", recoverable: false });
  });
});

describe("what a client does not know is ignored", () => {
  const base: RunState = reduceAll(fixture("basic_run").slice(0, 3));
  const next = base.lastSeq + 1;

  it("unknown event types only move lastSeq", () => {
    const after = reduce(base, envelope("FUTURE_EVENT", next, { type: "future", text: "x" }, "r_basic"));
    expect(after).toEqual({ ...base, lastSeq: next });
  });

  it("unknown data.type values are ignored", () => {
    const after = reduce(base, envelope("REASONING_DELTA", next, { type: "rich_reasoning", text: "x" }, "r_basic"));
    expect(after.reasoning).toBe(base.reasoning);
    expect(after.lastSeq).toBe(next);
  });

  it("unknown fields are ignored and fields of the wrong type read as missing", () => {
    const delta = envelope("REASONING_DELTA", next, { type: "reasoning", text: "!", future: { a: 1 } }, "r_basic");
    expect(reduce(base, { ...delta, extra: true }).reasoning[0]?.text).toBe(`${base.reasoning[0]?.text}!`);
    const wrong = envelope("TOOL_START", next, { type: "tool", toolCallId: 7, toolName: ["x"], arguments: 3 }, "r_basic");
    expect(reduce(base, wrong).tools.byId["7"]).toMatchObject({ toolName: "", argsText: "", status: "running" });
    const noId = envelope("TOOL_START", next, { type: "tool", toolName: "python" }, "r_basic");
    expect(reduce(base, noId).tools).toBe(base.tools);
  });

  it("unknown AGENT_STATUS codes still make a toast, which never reaches the answer", () => {
    const after = reduce(base, envelope("AGENT_STATUS", next, { type: "agent_status", code: "NEW_CODE", message: "hello" }, "r_basic"));
    expect(after.toast).toMatchObject({ code: "NEW_CODE", message: "hello" });
    expect(finalText(after)).toBe(finalText(base));
  });

  it("garbage never throws", () => {
    for (const junk of [null, undefined, 3, "TEXT_DELTA", [], {}, { eventType: 5, seq: "1" }, { seq: next }, { seq: -2 }, { seq: 1.5 }]) {
      expect(() => reduce(base, junk)).not.toThrow();
    }
    expect(reduce(base, { eventType: "TEXT_DELTA", seq: next, data: "x" }).lastSeq).toBe(next);
    expect(reduce(base, { eventType: "TODO_UPDATE", seq: next, data: { type: "todo", items: "no" } }).todos).toEqual([]);
    expect(reduce(base, { eventType: "toString", seq: next, data: {} }).lastSeq).toBe(next);
  });

  it("events of another run are ignored", () => {
    expect(reduce(base, envelope("TEXT_START", next, { type: "text", text: "x" }, "r_other"))).toBe(base);
  });
});

describe("throughput", () => {
  it("20,000 TEXT_DELTA events reduce to the exact concatenation", () => {
    const pieces: string[] = [];
    const events: unknown[] = [envelope("TEXT_START", 0, { type: "text", text: "" })];
    for (let i = 0; i < 20_000; i++) {
      const piece = `w${i % 97}${i % 7 === 0 ? "\n\n" : " "}`;
      pieces.push(piece);
      events.push(envelope("TEXT_DELTA", i + 1, { type: "text", text: piece }));
    }
    events.push(envelope("TEXT_END", 20_001, { type: "text" }));
    const state = reduceAll(events);
    expect(state.answer).toHaveLength(1);
    expect(state.answer[0]?.text).toBe(pieces.join(""));
    expect(state.lastSeq).toBe(20_001);
  });
});

describe("the loop's decisions (PHASE_CHANGED, PROGRESS_EVALUATED, STOP_REASON_DECIDED)", () => {
  const start = envelope("SESSION_CREATED", 0, { type: "session", sessionId: "s_1" });
  const phase = (seq: number, name: string, extra: Record<string, unknown> = {}) =>
    envelope("PHASE_CHANGED", seq, { type: "phase", phase: name, ...extra });

  it("keeps the latest phase, with the tools about to run", () => {
    const state = reduceAll([
      start,
      phase(1, "building_context"),
      phase(2, "calling_model", { previousPhase: "building_context" }),
      phase(3, "running_tools", { previousPhase: "calling_model", toolNames: ["read_file", "python"] }),
    ]);
    expect(state.status).toBe("running");
    expect(state.phase).toEqual({ phase: "running_tools", toolNames: ["read_file", "python"] });
    expect(statusLabel(state)).toBe("Running · running tools: read_file, python");
    expect(statusLabel(reduce(state, phase(4, "calling_model")))).toBe("Running · waiting for the model");
  });

  it("counts steps without progress and records why the loop stopped", () => {
    const state = reduceAll([
      start,
      envelope("PROGRESS_EVALUATED", 1, { type: "progress", progressed: false, noProgressCount: 1 }),
      envelope("PROGRESS_EVALUATED", 2, { type: "progress", progressed: false, noProgressCount: 2 }),
      envelope("STOP_REASON_DECIDED", 3, { type: "stop_reason", reason: "max_steps", finishReason: "MAX_STEPS" }),
    ]);
    expect(state.noProgress).toBe(2);
    expect(state.stopReason).toBe("max_steps");
    const all = reduceAll(fixture("catalogue_rest"));
    expect(all.stopReason).toBe("cancel");
    expect(all.noProgress).toBe(2);
  });

  it("shows only phases it knows, and the run's own status once it ended", () => {
    const unknown = reduceAll([start, phase(1, "dreaming")]);
    expect(statusLabel(unknown)).toBe("Running");
    const bad = reduceAll([start, phase(1, "calling_model"), envelope("PHASE_CHANGED", 2, { type: "phase", phase: 7 })]);
    expect(bad.phase?.phase).toBe("calling_model");
    const done = reduce(bad, envelope("MESSAGE_COMPLETED", 3, { type: "message", finishReason: "STOP" }));
    expect(statusLabel(done)).toBe("Done");
  });
});

describe("a crew's events", () => {
  it("move a run's view past them and change nothing else in it", () => {
    const events = fixture("catalogue_rest");
    const crew = events.filter((e) => String(e.eventType).startsWith("crew:"));
    expect(crew.map((e) => e.eventType)).toEqual([
      "crew:run:status",
      "crew:index",
      "crew:task:status",
      "crew:escalation",
      "crew:log",
    ]);
    const before = reduceAll(events.slice(0, events.indexOf(crew[0]!)));
    const after = reduceAll(crew, before);
    expect(after).toEqual({ ...before, lastSeq: crew[crew.length - 1]!.seq });
  });
});
