/**
 * The pure reducer: `reduce(state, envelope) → state`. No DOM, no clock, no I/O.
 *
 * Rules (seed 003 §6, §10): an event whose seq is not above `lastSeq` is a duplicate or arrived
 * out of order and is dropped; an event without a seq (HEARTBEAT) changes nothing; an unknown
 * `eventType` or `data.type`, or a field of the wrong type, never throws — the event only moves
 * `lastSeq`. A suspended (or failed, then retried) run continues under the same requestId with
 * later seqs: its next non-terminal event sets the status back to running.
 */
import type { ClarifyData, MessageData, PermissionAskData, PermissionResolvedData, SessionData } from "./events";
import { DATA_TYPE_OF, type EventTypeName } from "./catalogue";
import { FROM_HISTORY } from "./history";
import { readClarify, readPermission } from "./reducer-asks";
import { applyPhase, applyProgress, applyStopReason } from "./reducer-decisions";
import { applySubagent } from "./reducer-subagents";
import { applyAskedTool, applyTool, applyToolSide, settleUnfinished } from "./reducer-tools";
import {
  applyAttachment,
  applyCompaction,
  applyInputConsumed,
  applyProcess,
  applySkill,
  applyStatus,
  applyTodo,
  applyTokenUsage,
  readUsage,
} from "./reducer-side";
import { initialState, type RunState, type TextSegment } from "./state";
import { TERMINAL_EVENT_TYPES, bool, id, isRecord, num, seqOf, str, type Loose } from "./wire";

export type Data = Readonly<Record<string, unknown>>;
export type Handler = (state: RunState, data: Data, seq: number, eventType: string) => RunState;

const noChange: Handler = (state) => state;

/**
 * What each event type does to the state: one entry for every event type of the catalogue, so a
 * new event type without one here fails to compile; one the widget does not show is `noChange`.
 */
const ROUTES: { readonly [T in EventTypeName]: Handler } = {
  SESSION_CREATED: applySession,
  TEXT_START: (s, d) => ({ ...s, answer: startSegment(s.answer, d) }),
  TEXT_DELTA: (s, d) => ({ ...s, answer: appendSegment(s.answer, d) }),
  TEXT_END: (s) => ({ ...s, answer: closeLast(s.answer) }),
  REASONING_START: (s, d) => ({ ...s, reasoning: startSegment(s.reasoning, d) }),
  REASONING_DELTA: (s, d) => ({ ...s, reasoning: appendSegment(s.reasoning, d) }),
  REASONING_END: (s) => ({ ...s, reasoning: closeLast(s.reasoning) }),
  TOOL_CALL_GENERATING: applyTool,
  TOOL_START: applyTool,
  TOOL_RUNNING: applyTool,
  TOOL_COMPLETED: applyTool,
  TOOL_FAILED: applyTool,
  TOOL_EVENT: applyToolSide,
  PERMISSION_ASK: applyPermissionAsk,
  PERMISSION_ASK_RESOLVED: applyPermissionResolved,
  MESSAGE_COMPLETED: applyCompleted,
  MESSAGE_SUSPENDED: applySuspended,
  MESSAGE_FAILED: applyFailed,
  ATTACHMENT_CHANGED: applyAttachment,
  ATTACHMENT_SENT: applyAttachment,
  SUPPLEMENTARY_INPUT_CONSUMED: applyInputConsumed,
  HEARTBEAT: noChange,
  AGENT_STATUS: applyStatus,
  PROCESS_EVENT: applyProcess,
  BUDGET_CHECKED: noChange,
  LEDGER_RECONCILED: noChange,
  TOKEN_USAGE: applyTokenUsage,
  COMPACTION_START: applyCompaction,
  COMPACTION_APPLIED: applyCompaction,
  COMPACTION_ERROR: applyCompaction,
  SKILL_ACTIVATED: applySkill,
  SKILL_DEACTIVATED: applySkill,
  SKILL_MISSING: applySkill,
  CLARIFY_REQUEST: applyClarify,
  TODO_UPDATE: applyTodo,
  SUBAGENT_RUN_STARTED: applySubagent,
  SUBAGENT_EVENT: applySubagent,
  SUBAGENT_RUN_COMPLETED: applySubagent,
  SESSION_ENTRY_ADDED: noChange,
  SESSION_ENTRY_UPDATED: noChange,
  SESSION_LEAF_CHANGED: noChange,
  PHASE_CHANGED: applyPhase,
  PROGRESS_EVALUATED: applyProgress,
  STOP_REASON_DECIDED: applyStopReason,
  // A crew's own stream and the index of crews: the crew board shows them, never a run's view.
  "crew:run:status": noChange,
  "crew:index": noChange,
  "crew:task:status": noChange,
  "crew:escalation": noChange,
  "crew:log": noChange,
};

/** Events after which a transient AGENT_STATUS is over (seed 003 §2: the next text/tool event). */
const CLEARS_TOAST = /^(TEXT_|REASONING_|TOOL_|MESSAGE_)/;

export function reduce(state: RunState, envelope: unknown): RunState {
  const seq = seqOf(envelope);
  if (seq === undefined || seq <= state.lastSeq || !isRecord(envelope)) return state;
  const requestId = str(envelope["requestId"]);
  if (state.requestId && requestId && requestId !== state.requestId) return state;

  const moved: RunState = {
    ...state,
    lastSeq: seq,
    requestId: state.requestId || requestId || null,
    step: num(envelope["step"]) ?? state.step,
    totalTokens: num(envelope["totalTokens"]) ?? state.totalTokens,
  };
  const eventType = str(envelope["eventType"]) ?? "";
  if (!isEventType(eventType)) return moved;
  const data = isRecord(envelope["data"]) ? envelope["data"] : {};
  const dataType = data["type"];
  // Another data.type than the one this event type carries is a shape we do not know.
  if (dataType !== undefined && dataType !== DATA_TYPE_OF[eventType]) return moved;

  try {
    const continued = continueRun(moved, eventType);
    const toastless = CLEARS_TOAST.test(eventType) ? { ...continued, toast: null } : continued;
    return ROUTES[eventType](toastless, data, seq, eventType);
  } catch {
    // A body we cannot make sense of must not stop the stream (seed 003 §10).
    return moved;
  }
}

function isEventType(eventType: string): eventType is EventTypeName {
  return Object.prototype.hasOwnProperty.call(ROUTES, eventType);
}

export function reduceAll(events: Iterable<unknown>, state: RunState = initialState()): RunState {
  let next = state;
  for (const event of events) next = reduce(next, event);
  return next;
}

/** A known non-terminal event after a suspension or a failure means the run goes on. */
function continueRun(state: RunState, eventType: string): RunState {
  if (TERMINAL_EVENT_TYPES.has(eventType) || state.status === "running" || state.status === "completed") {
    return state;
  }
  if (state.status === "idle") return { ...state, status: "running" };
  return { ...state, status: "running", permission: null, clarify: null, suspendReason: null, failure: null };
}

// --- text and reasoning segments -----------------------------------------------------------

/** A new segment; after a cut-off reply, the one before it taken up again (or replaced). */
function startSegment(segments: readonly TextSegment[], data: Data): readonly TextSegment[] {
  const text = str(data["text"]) ?? "";
  const closed = closeAll(segments);
  const last = closed[closed.length - 1];
  if (last && bool(data["continues"])) return [...closed.slice(0, -1), { ...last, text: last.text + text, open: true }];
  const kept = last && bool(data["replaces"]) ? closed.slice(0, -1) : closed;
  return [...kept, { text, open: true, synthetic: bool(data["synthetic"]) ?? false }];
}

function appendSegment(segments: readonly TextSegment[], data: Data): readonly TextSegment[] {
  const text = str(data["text"]) ?? "";
  const last = segments[segments.length - 1];
  if (!last || !last.open) return [...segments, { text, open: true, synthetic: false }];
  if (text === "") return segments;
  return [...segments.slice(0, -1), { ...last, text: last.text + text }];
}

function closeLast(segments: readonly TextSegment[]): readonly TextSegment[] {
  const last = segments[segments.length - 1];
  if (!last || !last.open) return segments;
  return [...segments.slice(0, -1), { ...last, open: false }];
}

function closeAll(segments: readonly TextSegment[]): readonly TextSegment[] {
  return segments.some((s) => s.open) ? segments.map((s) => (s.open ? { ...s, open: false } : s)) : segments;
}

// --- session, permission, clarify --------------------------------------------------------------

function applySession(state: RunState, data: Loose<SessionData>): RunState {
  const fromHistory = state.fromHistory || (data as Record<string, unknown>)[FROM_HISTORY] === true;
  return { ...state, sessionId: id(data.sessionId) ?? state.sessionId, fromHistory };
}

function applyPermissionAsk(state: RunState, data: Loose<PermissionAskData>): RunState {
  const permission = readPermission(data);
  return permission ? { ...applyAskedTool(state, permission), permission } : state;
}

function applyPermissionResolved(state: RunState, data: Loose<PermissionResolvedData>): RunState {
  const askId = id(data.askId);
  if (!state.permission || (askId && askId !== state.permission.askId)) return state;
  return { ...state, permission: null };
}

function applyClarify(state: RunState, data: Loose<ClarifyData>): RunState {
  const clarify = readClarify(data);
  return clarify ? { ...state, clarify } : state;
}

// --- terminal events -----------------------------------------------------------------------------

function ended(state: RunState, data: Loose<MessageData>): RunState {
  return {
    ...state,
    reasoning: closeAll(state.reasoning),
    answer: closeAll(state.answer),
    usage: readUsage(data.usage) ?? state.usage,
  };
}

function applyCompleted(state: RunState, data: Loose<MessageData>): RunState {
  return {
    ...settleUnfinished(ended(state, data)),
    status: "completed",
    finishReason: str(data.finishReason) ?? "STOP",
    finishMessage: str(data.finishMessage),
    permission: null,
    clarify: null,
    suspendReason: null,
    failure: null,
  };
}

function applySuspended(state: RunState, data: Loose<MessageData>): RunState {
  const reason = isRecord(data.suspendReason) ? data.suspendReason : {};
  const suspendReason = {
    type: str(reason["type"]) ?? "UNKNOWN",
    askId: id(reason["askId"]),
    message: str(reason["message"]),
  };
  return { ...ended(state, data), status: "suspended", suspendReason };
}

function applyFailed(state: RunState, data: Loose<MessageData>): RunState {
  const failure = {
    errorCode: str(data.errorCode) ?? "INTERNAL_ERROR",
    errorMessage: str(data.errorMessage) ?? "",
    recoverable: bool(data.recoverable) ?? false,
    networkError: bool(data.networkError) ?? false,
  };
  return { ...settleUnfinished(ended(state, data)), status: "failed", failure, permission: null, clarify: null, suspendReason: null };
}
