/**
 * The view state of one run, built only by `reduce` (reducer.ts) from the event stream.
 *
 * Every object is treated as immutable: a change makes a new object along its path and shares the
 * rest, so the renderer can tell what changed with `!==`.
 */

export type RunStatus = "idle" | "running" | "suspended" | "completed" | "failed";

/** `stopped`: the run ended (stopped, or failed elsewhere) before the call finished. */
export type ToolStatus = "generating" | "running" | "completed" | "failed" | "stopped";

export interface TextSegment {
  readonly text: string;
  /** False once its END event arrived (or the run ended). */
  readonly open: boolean;
  /** System-written text, e.g. the MAX_STEPS notice (answer segments only). */
  readonly synthetic: boolean;
}

export interface ToolNotice {
  readonly category: string;
  readonly message: string;
}

/** An edit a notebook tool applied (TOOL_EVENT `notebook_edit`); revertible by its id. */
export interface NotebookEdit {
  readonly editId: string;
  readonly path: string;
  readonly cellId: string;
  /** `insert`, `edit`, `delete`, `move`, or a kind a newer server added. */
  readonly kind: string;
  /** Unified diff of the cell's source (a one-line text for a move). Model text: shown as text. */
  readonly diff: string;
  readonly message?: string;
  /** `shared` (the open notebook's shared document) or `file` (it was not open: the file). */
  readonly via?: string;
  /** Why the edit went to the file, in the server's words (no room held it, or the server has no collaboration extension: what to install). */
  readonly note?: string;
}

/** What a notebook tool waiting for approval would do: the edit's diff, or the cell it would run. */
export interface AskPreview {
  readonly kind: "diff" | "code";
  readonly text: string;
  readonly cellId?: string;
  /** The cell changed since the agent read it: the edit will be refused. */
  readonly stale: boolean;
}

/** The MCP server a tool comes from, as its events say, and the tool's own name there. */
export interface McpOrigin {
  readonly server: string;
  /** Its name on the server (the name the model sees may be cut to fit). */
  readonly tool: string;
}

export interface ToolCard {
  readonly toolCallId: string;
  readonly toolName: string;
  /** Absent for neta's own tools (whose names may hold `__` too). */
  readonly mcp?: McpOrigin;
  /** Argument JSON: fragments concatenated while generating, the whole object from TOOL_START on. */
  readonly argsText: string;
  readonly status: ToolStatus;
  readonly title?: string;
  readonly output?: string;
  readonly truncated: boolean;
  readonly outputRef?: string;
  /** Virtual paths (server mode) or data URLs (embedded mode). */
  readonly images: readonly string[];
  readonly durationMs?: number;
  readonly errorMessage?: string;
  /** Side-channel messages (TOOL_EVENT) worth showing, e.g. auth_required. */
  readonly notices: readonly ToolNotice[];
  /** Text streamed by the tool (TOOL_EVENT category tool_stream_data). */
  readonly streamed: string;
  /** Notebook edits the call applied, in order. */
  readonly edits: readonly NotebookEdit[];
}

export interface PermissionAsk {
  readonly askId: string;
  readonly toolName: string;
  readonly mcp?: McpOrigin;
  readonly toolCallId?: string;
  readonly arguments: string;
  readonly ruleDescription?: string;
  readonly rulePattern?: string;
  readonly preview?: AskPreview;
  /** Of what the ask shows: sent back with the decision, which holds only for that. */
  readonly digest?: string;
}

export interface ClarifyRequest {
  readonly clarifyId: string;
  readonly question: string;
  readonly options: readonly string[];
}

/** Whether `next` is `prev` told again (a replay, a child's next change): equal in every field. */
export function sameRequest<T extends PermissionAsk | ClarifyRequest>(prev: T | null, next: T | null): boolean {
  return prev === next || (prev !== null && next !== null && JSON.stringify(prev) === JSON.stringify(next));
}

export interface ProcessOperation {
  readonly operationId: string;
  readonly parentOperationId?: string;
  readonly targetType?: string;
  readonly toolCallId?: string;
  readonly stage?: string;
  readonly status: string;
  readonly level: string;
  readonly message?: string;
  readonly current?: number;
  readonly total?: number;
  readonly percent?: number;
}

export interface StatusToast {
  readonly code: string;
  readonly level: string;
  readonly message: string;
  /** Seq of the AGENT_STATUS event: tells one toast from the next with the same text. */
  readonly seq: number;
}

export interface Attachment {
  readonly attachmentId: string;
  readonly fileName: string;
  readonly fileExtension?: string;
  readonly contentType?: string;
  readonly fileSize?: number;
  readonly virtualPath: string;
  readonly source?: string;
  readonly changeType?: string;
  /** ATTACHMENT_SENT was seen for it. */
  readonly sent: boolean;
}

export interface ConsumedInput {
  readonly inputId: string;
  readonly content: string;
}

export interface TodoEntry {
  readonly id: string;
  readonly content: string;
  readonly status: string;
}

export interface Usage {
  readonly promptTokens: number;
  readonly completionTokens: number;
  readonly cachedTokens: number;
  readonly reasoningTokens: number;
  readonly totalTokens: number;
}

export interface Failure {
  readonly errorCode: string;
  readonly errorMessage: string;
  readonly recoverable: boolean;
  readonly networkError: boolean;
}

export interface SuspendInfo {
  readonly type: string;
  readonly askId?: string;
  readonly message?: string;
}

/** Ordered collection keyed by id: `order` keeps first arrival, `byId` the latest value. */
export interface Keyed<T> {
  readonly order: readonly string[];
  readonly byId: Readonly<Record<string, T>>;
}

export interface SkillState {
  readonly name: string;
  readonly state: "active" | "inactive" | "missing";
  readonly message?: string;
}

export interface CompactionState {
  readonly phase: "start" | "applied" | "error";
  readonly scope?: string;
  readonly tokensBefore?: number;
  readonly tokensAfter?: number;
  readonly errorMessage?: string;
}

export interface SubagentBatch {
  readonly batchId: string;
  readonly done: boolean;
  readonly status?: string;
  readonly message?: string;
  readonly events: number;
  /** Its child runs' requestIds, in the order they were announced. */
  readonly children: readonly string[];
}

/** `queued`, `running`, `suspended`, `completed`, `failed`, or a status a newer server added. */
export type ChildStatus = string;

/** A child run (a sub-agent) as the parent's stream describes it: a bounded summary. */
export interface SubagentChild {
  /** The child run: its own stream has all of it, and actions on it name it. */
  readonly requestId: string;
  readonly batchId: string;
  readonly agentId?: string;
  /** What it was asked to do (written by the parent's model: shown as text only). */
  readonly task: string;
  readonly role?: string;
  readonly model?: string;
  readonly status: ChildStatus;
  /** Its live status line. */
  readonly message?: string;
  readonly step?: number;
  readonly totalTokens?: number;
  readonly durationMs?: number;
  /** The start of its answer; `answerTruncated` when the child's stream has more. */
  readonly answerPreview?: string;
  readonly answerTruncated: boolean;
  readonly errorCode?: string;
  readonly errorMessage?: string;
  /** What the suspended child waits for, answerable from the parent's view. */
  readonly permission: PermissionAsk | null;
  readonly clarify: ClarifyRequest | null;
}

export interface RunState {
  readonly requestId: string | null;
  readonly status: RunStatus;
  /** Highest seq applied; -1 before the first event. */
  readonly lastSeq: number;
  readonly sessionId?: string;
  readonly step?: number;
  /** Envelope `totalTokens` of the latest event carrying it. */
  readonly totalTokens?: number;
  readonly reasoning: readonly TextSegment[];
  readonly answer: readonly TextSegment[];
  readonly tools: Keyed<ToolCard>;
  readonly permission: PermissionAsk | null;
  readonly clarify: ClarifyRequest | null;
  readonly processes: Keyed<ProcessOperation>;
  /** Credentials the run lacks that belong to no tool card (its model endpoint's key). */
  readonly authNotices: readonly ToolNotice[];
  /** The latest AGENT_STATUS; never part of the transcript. */
  readonly toast: StatusToast | null;
  readonly attachments: Keyed<Attachment>;
  readonly inputsConsumed: readonly ConsumedInput[];
  readonly todos: readonly TodoEntry[];
  readonly usage: Usage | null;
  readonly finishReason?: string;
  readonly finishMessage?: string;
  readonly failure: Failure | null;
  readonly suspendReason: SuspendInfo | null;
  readonly skills: Keyed<SkillState>;
  readonly compaction: CompactionState | null;
  readonly subagents: Keyed<SubagentBatch>;
  /** Child runs of every batch, by requestId. */
  readonly children: Keyed<SubagentChild>;
  /** Where the loop is (PHASE_CHANGED); shown in the status line while the run runs. */
  readonly phase: LoopPhase | null;
  /** Steps in a row without progress (PROGRESS_EVALUATED). */
  readonly noProgress: number;
  /** Why the loop ended (STOP_REASON_DECIDED), once it did. */
  readonly stopReason: string | null;
  /** Rebuilt from its session's history, having no event log (see history.ts). */
  readonly fromHistory: boolean;
}

export interface LoopPhase {
  /** `building_context`, `budgeting`, `calling_model`, `running_tools`, `compacting`,
   * `finishing`, or a phase a newer server added. */
  readonly phase: string;
  /** The tools about to run (`running_tools`). */
  readonly toolNames: readonly string[];
}

export const EMPTY_KEYED: Keyed<never> = { order: [], byId: {} };

export function initialState(requestId: string | null = null): RunState {
  return {
    requestId,
    status: "idle",
    lastSeq: -1,
    reasoning: [],
    answer: [],
    tools: EMPTY_KEYED,
    permission: null,
    clarify: null,
    processes: EMPTY_KEYED,
    authNotices: [],
    toast: null,
    attachments: EMPTY_KEYED,
    inputsConsumed: [],
    todos: [],
    usage: null,
    failure: null,
    suspendReason: null,
    skills: EMPTY_KEYED,
    compaction: null,
    subagents: EMPTY_KEYED,
    children: EMPTY_KEYED,
    phase: null,
    noProgress: 0,
    stopReason: null,
    fromHistory: false,
  };
}

/** Insert or update one entry; `update` gets the previous value (if any). */
export function upsert<T>(keyed: Keyed<T>, key: string, update: (prev: T | undefined) => T): Keyed<T> {
  const prev = keyed.byId[key];
  const order = prev === undefined ? [...keyed.order, key] : keyed.order;
  return { order, byId: { ...keyed.byId, [key]: update(prev) } };
}

export function valuesOf<T>(keyed: Keyed<T>): T[] {
  return keyed.order.map((key) => keyed.byId[key]).filter((v): v is T => v !== undefined);
}

/** The answer as one string: segments joined by a blank line. */
export function finalText(state: RunState): string {
  return state.answer
    .map((segment) => segment.text)
    .filter((text) => text.length > 0)
    .join("\n\n");
}

/** The run is over for good (completed, or failed with no retry): no event can follow. */
export function hasEnded(state: RunState): boolean {
  return state.status === "completed" || (state.status === "failed" && state.failure?.recoverable !== true);
}
