import basicRun from "./fixtures/basic_run.json";
import catalogueRest from "./fixtures/catalogue_rest.json";
import failedRecoverable from "./fixtures/failed_recoverable.json";
import maxSteps from "./fixtures/max_steps.json";
import permissionResume from "./fixtures/permission_resume.json";
import processNested from "./fixtures/process_nested.json";

export type Envelope = Record<string, unknown> & { eventType: string; seq?: number; data: Record<string, unknown> };

const RECORDED = {
  basic_run: basicRun,
  permission_resume: permissionResume,
  failed_recoverable: failedRecoverable,
  process_nested: processNested,
  max_steps: maxSteps,
  catalogue_rest: catalogueRest,
};

export const FIXTURES = Object.keys(RECORDED) as (keyof typeof RECORDED)[];

/** A fresh deep copy of a recorded stream (tests may freeze or edit what they get). */
export function fixture(name: keyof typeof RECORDED): Envelope[] {
  return structuredClone(RECORDED[name]) as Envelope[];
}

/** A made-up envelope for one-off cases. */
export function envelope(
  eventType: string,
  seq: number | undefined,
  data: Record<string, unknown>,
  requestId = "r_test",
): Envelope {
  const out: Envelope = { eventType, requestId, data, timestamp: "2026-07-24T10:00:00.000Z" };
  if (seq !== undefined) out.seq = seq;
  return out;
}

/**
 * A parent run that delegates two tasks: child `r_child_a` reads and completes, child `r_child_b`
 * asks permission to run code, is approved, and completes; what each child's status line, task
 * and answer say is hostile markup (a model wrote it).
 */
export function delegatedRun(): Envelope[] {
  const p = (eventType: string, seq: number, data: Record<string, unknown>) => envelope(eventType, seq, data, "r_parent");
  const event = (seq: number, data: Record<string, unknown>) => p("SUBAGENT_EVENT", seq, { type: "subagent", batchId: "b1", ...data });
  return [
    p("SESSION_CREATED", 0, { type: "session", sessionId: "s_1" }),
    p("TOOL_START", 1, { type: "tool", toolCallId: "c_del", toolName: "delegate", arguments: '{"tasks": ["…"]}' }),
    p("SUBAGENT_RUN_STARTED", 2, {
      type: "subagent",
      batchId: "b1",
      children: [
        { requestId: "r_child_a", agentId: "a1", task: "Summarise notes.txt", role: "reader" },
        { requestId: "r_child_b", agentId: "a2", task: 'Profile data.csv <img src=x onerror="alert(1)">', role: "analyst", status: "queued" },
      ],
    }),
    event(3, { childRequestId: "r_child_a", status: "running", message: "reading notes.txt", step: 1, totalTokens: 120, durationMs: 800 }),
    event(4, { childRequestId: "r_child_b", status: "running", message: "<b>loading</b>" }),
    event(5, {
      childRequestId: "r_child_b",
      status: "suspended",
      ask: { type: "permission_ask", askId: "ask_b", toolName: "python", toolCallId: "c_b", arguments: '{"code": "df.describe()"}' },
    }),
    event(6, { agentId: "a1", status: "completed", answerPreview: "notes.txt lists three **ideas**", answerTruncated: true, totalTokens: 480, durationMs: 2400 }),
    event(7, { childRequestId: "r_child_b", status: "running", message: "running python", totalTokens: 300 }),
    event(8, { childRequestId: "r_child_b", status: "completed", answerPreview: "<script>alert(1)</script>data.csv has 3 columns", totalTokens: 650, durationMs: 61_000 }),
    p("SUBAGENT_RUN_COMPLETED", 9, { type: "subagent", batchId: "b1", status: "completed", message: "2 of 2 completed" }),
    p("TOOL_COMPLETED", 10, { type: "tool", toolCallId: "c_del", toolName: "delegate", output: "two answers" }),
    p("TEXT_START", 11, { type: "text", text: "Both files are " }),
    p("TEXT_DELTA", 12, { type: "text", text: "small." }),
    p("TEXT_END", 13, { type: "text" }),
    p("MESSAGE_COMPLETED", 14, { type: "message", finishReason: "STOP" }),
  ];
}

/** The stream of `r_child_b`: it asks to run code, and goes on once approved. */
export function childRun(): Envelope[] {
  const c = (eventType: string, seq: number, data: Record<string, unknown>) => envelope(eventType, seq, data, "r_child_b");
  return [
    c("SESSION_CREATED", 0, { type: "session", sessionId: "s_1" }),
    c("TOOL_START", 1, { type: "tool", toolCallId: "c_b", toolName: "python", arguments: '{"code": "df.describe()"}' }),
    c("PERMISSION_ASK", 2, { type: "permission_ask", askId: "ask_b", toolName: "python", toolCallId: "c_b", arguments: '{"code": "df.describe()"}' }),
    c("MESSAGE_SUSPENDED", 3, { type: "message", suspendReason: { type: "PERMISSION_ASK", askId: "ask_b" } }),
    c("PERMISSION_ASK_RESOLVED", 4, { type: "permission_ask_resolved", askId: "ask_b", approved: true }),
    c("TOOL_COMPLETED", 5, { type: "tool", toolCallId: "c_b", toolName: "python", output: "count 3" }),
    c("TEXT_START", 6, { type: "text", text: "data.csv has 3 columns" }),
    c("TEXT_END", 7, { type: "text" }),
    c("MESSAGE_COMPLETED", 8, { type: "message", finishReason: "STOP" }),
  ];
}

/** The first `n` events, up to and including the first of type `eventType` when given that. */
export function upTo(events: Envelope[], until: number | string): Envelope[] {
  const end = typeof until === "number" ? until + 1 : events.findIndex((e) => e.eventType === until) + 1;
  return events.slice(0, end);
}
