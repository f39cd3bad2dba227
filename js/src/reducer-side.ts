/** Everything beside the transcript: attachments, inputs, status toasts, processes, usage, skills, todos. */
import type {
  AgentStatusData,
  AttachmentData,
  CompactionData,
  ProcessData,
  SkillData,
  SupplementaryInputData,
  TodoData,
  TokenUsageData,
  Usage as WireUsage,
} from "./events";
import { upsert, type CompactionState, type ProcessOperation, type RunState, type TodoEntry, type Usage } from "./state";
import { id, isRecord, num, str, type Loose } from "./wire";

export function applyAttachment(
  state: RunState,
  data: Loose<AttachmentData>,
  _seq: number,
  eventType: string,
): RunState {
  const attachmentId = id(data.attachmentId);
  const virtualPath = str(data.virtualPath);
  if (!attachmentId || !virtualPath) return state;
  const attachments = upsert(state.attachments, attachmentId, (prev) => ({
    attachmentId,
    virtualPath,
    fileName: str(data.fileName) || prev?.fileName || virtualPath.split("/").pop() || attachmentId,
    fileExtension: str(data.fileExtension) ?? prev?.fileExtension,
    contentType: str(data.contentType) ?? prev?.contentType,
    fileSize: num(data.fileSize) ?? prev?.fileSize,
    source: str(data.source) ?? prev?.source,
    changeType: str(data.changeType) ?? prev?.changeType,
    sent: eventType === "ATTACHMENT_SENT" || (prev?.sent ?? false),
  }));
  return { ...state, attachments };
}

export function applyInputConsumed(state: RunState, data: Loose<SupplementaryInputData>): RunState {
  const inputId = id(data.inputId) ?? "";
  if (inputId && state.inputsConsumed.some((input) => input.inputId === inputId)) return state;
  return { ...state, inputsConsumed: [...state.inputsConsumed, { inputId, content: str(data.content) ?? "" }] };
}

export function applyStatus(state: RunState, data: Loose<AgentStatusData>, seq: number): RunState {
  const code = str(data.code);
  if (!code) return state;
  return { ...state, toast: { code, level: str(data.level) ?? "INFO", message: str(data.message) ?? "", seq } };
}

/** Later events of an operation update only the fields they carry (progress may be left out). */
export function applyProcess(state: RunState, data: Loose<ProcessData>): RunState {
  const operationId = id(data.operationId);
  if (!operationId) return state;
  const processes = upsert(state.processes, operationId, (prev): ProcessOperation => ({
    operationId,
    parentOperationId: id(data.parentOperationId) ?? prev?.parentOperationId,
    targetType: str(data.targetType) ?? prev?.targetType,
    toolCallId: id(data.toolCallId) ?? prev?.toolCallId,
    stage: str(data.stage) ?? prev?.stage,
    status: str(data.status) ?? prev?.status ?? "running",
    level: str(data.level) ?? prev?.level ?? "info",
    message: str(data.message) ?? prev?.message,
    current: num(data.current) ?? prev?.current,
    total: num(data.total) ?? prev?.total,
    percent: num(data.percent) ?? prev?.percent,
  }));
  return { ...state, processes };
}

export function readUsage(value: unknown): Usage | null {
  if (!isRecord(value)) return null;
  const usage = value as Loose<WireUsage>;
  const promptTokens = num(usage.promptTokens) ?? 0;
  const completionTokens = num(usage.completionTokens) ?? 0;
  return {
    promptTokens,
    completionTokens,
    cachedTokens: num(usage.cachedTokens) ?? 0,
    reasoningTokens: num(usage.reasoningTokens) ?? 0,
    totalTokens: num(usage.totalTokens) ?? promptTokens + completionTokens,
  };
}

/**
 * TOKEN_USAGE gives the turn's figures until the terminal event's `usage` snapshot replaces them.
 * One about a sub-agent (its whole usage, counted in this run's) is not this run's turn: the
 * sub-agent's row shows its tokens, and the snapshot at the end has them in the run's total.
 */
export function applyTokenUsage(state: RunState, data: Loose<TokenUsageData>): RunState {
  if (id(data.subagentRequestId)) return state;
  const promptTokens = num(data.inputTokens);
  const completionTokens = num(data.outputTokens);
  if (promptTokens === undefined && completionTokens === undefined) return state;
  const usage: Usage = {
    promptTokens: promptTokens ?? 0,
    completionTokens: completionTokens ?? 0,
    cachedTokens: num(data.cachedTokens) ?? 0,
    reasoningTokens: num(data.reasoningTokens) ?? 0,
    totalTokens: (promptTokens ?? 0) + (completionTokens ?? 0),
  };
  return { ...state, usage };
}

const COMPACTION_PHASES: Readonly<Record<string, CompactionState["phase"]>> = {
  COMPACTION_START: "start",
  COMPACTION_APPLIED: "applied",
  COMPACTION_ERROR: "error",
};

export function applyCompaction(state: RunState, data: Loose<CompactionData>, _seq: number, eventType: string): RunState {
  const phase = COMPACTION_PHASES[eventType];
  if (!phase) return state;
  const compaction: CompactionState = {
    phase,
    scope: str(data.scope),
    tokensBefore: num(data.tokensBefore),
    tokensAfter: num(data.tokensAfter),
    errorMessage: str(data.errorMessage),
  };
  return { ...state, compaction };
}

const SKILL_STATES: Readonly<Record<string, "active" | "inactive" | "missing">> = {
  SKILL_ACTIVATED: "active",
  SKILL_DEACTIVATED: "inactive",
  SKILL_MISSING: "missing",
};

export function applySkill(state: RunState, data: Loose<SkillData>, _seq: number, eventType: string): RunState {
  const name = str(data.skillName);
  const skillState = SKILL_STATES[eventType];
  if (!name || !skillState) return state;
  const skills = upsert(state.skills, name, () => ({ name, state: skillState, message: str(data.message) }));
  return { ...state, skills };
}

export function applyTodo(state: RunState, data: Loose<TodoData>): RunState {
  if (!Array.isArray(data.items)) return state;
  const todos: TodoEntry[] = [];
  for (const item of data.items) {
    if (!isRecord(item)) continue;
    const content = str(item["content"]);
    if (content === undefined) continue;
    todos.push({ id: id(item["id"]) ?? String(todos.length), content, status: str(item["status"]) ?? "pending" });
  }
  return { ...state, todos };
}
