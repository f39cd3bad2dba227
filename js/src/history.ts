/**
 * A past run rebuilt from its session's tree when its event log cannot be read (a run imported
 * from history has none): the entries the run wrote become the envelopes its stream would have
 * carried — answer text, one card per tool call with its output or failure, its process timeline
 * as the tree sampled it — so the reducer and the view show it like any other run.
 */
import { isRecord, num, str } from "./wire";

type Entry = Readonly<Record<string, unknown>>;

/** The field of the rebuilt SESSION_CREATED that marks a run shown from history (never on the wire). */
export const FROM_HISTORY = "fromHistory";

export const HISTORY_NOTICE = "Shown from the session's history: this run has no event log.";

/** How the run ended, from its status (`GET …/run/status`). */
export interface RunEnding {
  readonly status: string;
  readonly errorCode?: string;
  readonly errorMessage?: string;
}

export function historyEvents(tree: unknown, requestId: string, ending: RunEnding): unknown[] {
  const entries = isRecord(tree) && Array.isArray(tree["entries"]) ? tree["entries"].filter(isRecord) : [];
  const mine = entries.filter((e) => e["requestId"] === requestId);
  const results = new Map<string, string>();
  for (const entry of mine) {
    const message = isRecord(entry["message"]) ? entry["message"] : {};
    const callId = str(message["tool_call_id"]);
    if (entry["role"] === "tool" && callId) results.set(callId, str(message["content"]) ?? "");
  }
  const out: unknown[] = [];
  const push = (eventType: string, data: Record<string, unknown>): void => {
    out.push({ eventType, seq: out.length, requestId, data });
  };
  // Marked in the state, not in a passing notice: a view drawn again from the state says it too.
  const sessionId = str(isRecord(tree) ? tree["sessionId"] : undefined) ?? "";
  push("SESSION_CREATED", { type: "session", sessionId, [FROM_HISTORY]: true });
  let lastAssistant: string | undefined;
  for (const entry of mine) {
    if (entry["role"] !== "assistant") continue;
    lastAssistant = str(entry["entryId"]);
    const message = isRecord(entry["message"]) ? entry["message"] : {};
    const text = str(message["content"]) ?? "";
    if (text) {
      push("TEXT_START", { type: "text", text: "" });
      push("TEXT_DELTA", { type: "text", text });
      push("TEXT_END", { type: "text" });
    }
    const calls = Array.isArray(entry["toolCalls"]) ? entry["toolCalls"].filter(isRecord) : [];
    for (const call of calls) replayCall(call, results, push);
  }
  push(...ended(ending, lastAssistant));
  return out;
}

function replayCall(call: Entry, results: ReadonlyMap<string, string>, push: (t: string, d: Record<string, unknown>) => void): void {
  const toolCallId = str(call["toolCallId"]);
  if (!toolCallId) return;
  const tool = { type: "tool", toolCallId, toolName: str(call["toolName"]) ?? "tool" };
  const server = str(call["mcpServer"]);
  const mcp = server ? { mcpServer: server, mcpTool: str(call["mcpTool"]) ?? "" } : {};
  push("TOOL_START", { ...tool, ...mcp, arguments: str(call["arguments"]) ?? "{}" });
  const process = Array.isArray(call["process"]) ? call["process"].filter(isRecord) : [];
  for (const step of process) push("PROCESS_EVENT", { ...step, type: "process", toolCallId });
  const durationMs = num(call["durationMs"]);
  const timing = durationMs === undefined ? {} : { durationMs };
  const status = call["status"];
  if (status === "completed") {
    const images = Array.isArray(call["images"]) ? { images: call["images"] } : {};
    const ref = str(call["outputRef"]);
    const output = { output: results.get(toolCallId) ?? "", ...(ref ? { truncated: true, outputRef: ref } : {}) };
    push("TOOL_COMPLETED", { ...tool, ...output, ...images, ...timing });
  } else if (status === "failed" || status === "not_run") {
    const why = str(call["errorMessage"]) ?? (status === "not_run" ? "Not run: the run ended first" : "The tool failed");
    push("TOOL_FAILED", { ...tool, errorMessage: why, ...timing });
  }
}

function ended(ending: RunEnding, messageId: string | undefined): [string, Record<string, unknown>] {
  const message = { type: "message", ...(messageId ? { messageId } : {}) };
  if (ending.status === "failed") {
    const failure = { errorCode: ending.errorCode ?? "INTERNAL_ERROR", errorMessage: ending.errorMessage ?? "", recoverable: false };
    return ["MESSAGE_FAILED", { ...message, ...failure }];
  }
  if (ending.status === "suspended") return ["MESSAGE_SUSPENDED", message];
  return ["MESSAGE_COMPLETED", { ...message, finishReason: "STOP" }];
}
