/** Text shown to the user: durations, sizes, token counts, arguments, status labels. */
import type { McpOrigin, RunState, Usage } from "../state";

export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const minutes = Math.floor(ms / 60_000);
  return `${minutes} min ${Math.round((ms % 60_000) / 1000)} s`;
}

export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

export function formatCount(n: number): string {
  return Math.round(n).toLocaleString("en-US");
}

/** Cached share of the prompt, or null when there was no prompt (seed 003 §1). */
export function cacheHitRate(usage: Usage): number | null {
  return usage.promptTokens > 0 ? usage.cachedTokens / usage.promptTokens : null;
}

export function usageText(usage: Usage): string {
  const parts = [
    `${formatCount(usage.totalTokens)} tokens`,
    `${formatCount(usage.promptTokens)} in`,
    `${formatCount(usage.completionTokens)} out`,
  ];
  if (usage.reasoningTokens > 0) parts.push(`${formatCount(usage.reasoningTokens)} reasoning`);
  const rate = cacheHitRate(usage);
  if (rate !== null) parts.push(`cache hit ${Math.round(rate * 100)}%`);
  return parts.join(" · ");
}

/** A tool as the user reads its name. */
export interface ToolLabel {
  readonly tool: string;
  /** The MCP server offering it; absent for neta's own tools. */
  readonly server?: string;
}

/**
 * An MCP server's tool by its own name and its server's, as its events say; any other tool by
 * the name the model called (a tool of neta's own may hold `__` in its name too).
 */
export function toolLabel(toolName: string, mcp?: McpOrigin): ToolLabel {
  return mcp ? { tool: mcp.tool || toolName, server: mcp.server } : { tool: toolName };
}

/** A cell id as people read it: a notebook's UUIDs (36 characters) by their first eight. */
export function shortIds(text: string): string {
  return text.replace(UUID, "$1");
}

const UUID = /\b([0-9a-f]{8})-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/gi;

export type ArgsView =
  | { readonly kind: "code"; readonly text: string }
  | { readonly kind: "json"; readonly text: string }
  | { readonly kind: "raw"; readonly text: string };

/** Complete argument JSON pretty-printed; `{"code": …}` shown as the code itself. */
export function argsView(argsText: string): ArgsView {
  try {
    const parsed: unknown = JSON.parse(argsText);
    if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) {
      const entries = Object.entries(parsed);
      const [first] = entries;
      if (entries.length === 1 && first && first[0] === "code" && typeof first[1] === "string") {
        return { kind: "code", text: first[1] };
      }
    }
    return { kind: "json", text: JSON.stringify(parsed, null, 2) };
  } catch {
    return { kind: "raw", text: argsText };
  }
}

const SUSPEND_LABELS: Readonly<Record<string, string>> = {
  PERMISSION_ASK: "Waiting for your approval",
  CLARIFY_REQUEST: "Waiting for your answer",
  MANUAL_SUSPEND: "Paused",
  SHUTDOWN_INTERRUPT: "Interrupted by a server shutdown",
  ASYNC_TOOL_PENDING: "Waiting for a tool to finish",
};

export function statusLabel(state: RunState): string {
  switch (state.status) {
    case "idle":
      return "Starting…";
    case "running":
      return runningLabel(state);
    case "suspended":
      // Without a reason (a saved summary from before reasons were kept, or from the kernel) the
      // run may be waiting for anything, an approval included: "Suspended" would be wrong.
      return SUSPEND_LABELS[state.suspendReason?.type ?? ""] ?? "Waiting";
    case "completed":
      return "Done";
    case "failed":
      return wasStopped(state) ? "Stopped" : "Failed";
  }
}

/** The run ended because it was stopped (Stop, or a prompt sent to take its place), not by a fault. */
export function wasStopped(state: RunState): boolean {
  return state.status === "failed" && state.failure?.errorCode === "USER_CANCELLED";
}

/** What the server says of a plain Stop: the header's "Stopped" says it already. */
const PLAIN_STOP = /^(the run was (cancelled|stopped)|stopped by the user)\.?$/i;

/** The footer's line for a stopped run: why, when it was more than a plain Stop. */
export function stoppedText(state: RunState): string {
  const message = state.failure?.errorMessage.trim() ?? "";
  return message && !PLAIN_STOP.test(message) ? `Stopped: ${message}` : "Stopped";
}

const PHASE_LABELS: Readonly<Record<string, string>> = {
  building_context: "building the context",
  budgeting: "checking the token budget",
  calling_model: "waiting for the model",
  running_tools: "running tools",
  compacting: "compacting the conversation",
  finishing: "finishing",
};

/** "Running", with what the loop is doing when the server said (a phase it names unknown: not). */
function runningLabel(state: RunState): string {
  const phase = state.phase;
  const label = phase ? PHASE_LABELS[phase.phase] : undefined;
  if (!phase || !label) return "Running";
  const tools = phase.phase === "running_tools" && phase.toolNames.length > 0;
  return `Running · ${label}${tools ? `: ${[...new Set(phase.toolNames)].join(", ")}` : ""}`;
}

const FINISH_LABELS: Readonly<Record<string, string>> = {
  STOP: "Finished",
  MAX_STEPS: "Stopped at the step limit",
};

export function finishLabel(reason: string): string {
  return FINISH_LABELS[reason] ?? `Finished (${reason})`;
}

/** Text for AGENT_STATUS codes that arrive without a message (seed 003 §4). */
const STATUS_TEXT: Readonly<Record<string, string>> = {
  IMPORTING_ATTACHMENTS: "Importing attachments…",
  LLM_RATE_LIMITED: "The model is rate limited, retrying…",
  LLM_NETWORK_RETRYING: "Network trouble, reconnecting to the model…",
  LLM_AUTO_RECOVERING: "Recovering from a network failure…",
  LLM_EMPTY_RESPONSE_RETRYING: "The model answered nothing, retrying…",
  CONTEXT_COMPACTING: "Compacting the conversation…",
  TOOL_CONSECUTIVE_FAILURES: "Tools keep failing; the agent was told to change course",
};

export function toastText(code: string, message: string): string {
  return message || STATUS_TEXT[code] || "";
}
