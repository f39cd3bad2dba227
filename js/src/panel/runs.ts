/**
 * The panel's run list as the server describes it (`GET neta/api/agent/runs`), read through
 * checking accessors: the answer is untrusted JSON like any other, and its prompts are a person's
 * or a model's text, shown only as text.
 */
import { isRecord, num, str } from "../wire";

export type OriginKind = "cell" | "terminal" | "panel" | "api" | "mcp" | "crew" | "subagent";
export type RunStatus = "running" | "suspended" | "completed" | "failed";

export interface Origin {
  readonly kind: OriginKind;
  readonly notebookPath: string | null;
  readonly client: string | null;
}

export interface PendingAsk {
  readonly kind: "permission" | "clarify";
  readonly askId: string;
  readonly toolName: string;
}

export interface RunRow {
  readonly requestId: string;
  readonly sessionId: string;
  readonly status: RunStatus;
  readonly model: string;
  readonly prompt: string;
  /** Seconds since the epoch. */
  readonly created: number;
  readonly tokens: number;
  readonly origin: Origin;
  readonly parent: string | null;
  readonly pendingAsk: PendingAsk | null;
}

const STATUSES: readonly RunStatus[] = ["running", "suspended", "completed", "failed"];
const ORIGINS: readonly OriginKind[] = ["cell", "terminal", "panel", "api", "mcp", "crew", "subagent"];

function oneOf<T extends string>(value: unknown, allowed: readonly T[], fallback: T): T {
  return allowed.find((item) => item === value) ?? fallback;
}

function readOrigin(value: unknown): Origin {
  const origin = isRecord(value) ? value : {};
  return {
    kind: oneOf(origin["kind"], ORIGINS, "api"),
    notebookPath: str(origin["notebookPath"]) ?? null,
    client: str(origin["client"]) ?? null,
  };
}

function readAsk(value: unknown): PendingAsk | null {
  if (!isRecord(value)) return null;
  const askId = str(value["askId"]);
  if (!askId) return null;
  return { kind: value["kind"] === "clarify" ? "clarify" : "permission", askId, toolName: str(value["toolName"]) ?? "" };
}

/**
 * A run's pending ask, while it waits on it: a suspended run, or an MCP session's run, whose call
 * waits live (it is not suspended) for the decision.
 */
function waitingAsk(value: Record<string, unknown>, origin: Origin): PendingAsk | null {
  const waits = value["status"] === "suspended" || (value["status"] === "running" && origin.kind === "mcp");
  return waits ? readAsk(value["pendingAsk"]) : null;
}

function readRow(value: unknown): RunRow | null {
  if (!isRecord(value)) return null;
  const requestId = str(value["requestId"]);
  if (!requestId) return null;
  const usage = isRecord(value["usage"]) ? value["usage"] : {};
  const origin = readOrigin(value["origin"]);
  return {
    requestId,
    sessionId: str(value["sessionId"]) ?? "",
    status: oneOf(value["status"], STATUSES, "running"),
    model: str(value["model"]) ?? "",
    prompt: str(value["prompt"]) ?? "",
    created: num(value["created"]) ?? 0,
    tokens: num(usage["totalTokens"]) ?? 0,
    origin,
    parent: str(value["parentRequestId"]) ?? null,
    pendingAsk: waitingAsk(value, origin),
  };
}

/** The runs of a `runs` answer, newest first as the server sends them; malformed ones left out. */
export function parseRuns(body: unknown): RunRow[] {
  const runs = isRecord(body) && Array.isArray(body["runs"]) ? body["runs"] : [];
  return runs.map(readRow).filter((row): row is RunRow => row !== null);
}

/** The last part of a path: a notebook is named by its file. */
function baseName(path: string): string {
  return path.split("/").filter(Boolean).pop() ?? path;
}

/** Where a run came from, in a few words. */
export function originLabel(origin: Origin): string {
  const notebook = origin.notebookPath ? baseName(origin.notebookPath) : null;
  switch (origin.kind) {
    case "cell":
      return notebook ? `cell · ${notebook}` : "cell";
    case "panel":
      return notebook ? `panel · ${notebook}` : "panel";
    case "terminal":
      return "terminal";
    case "mcp":
      return origin.client ? `MCP · ${origin.client}` : "MCP client";
    case "crew":
      return "crew task";
    case "subagent":
      return "sub-agent";
    default:
      return notebook ? `API · ${notebook}` : "API";
  }
}

export type StatusFilter = "all" | "active" | "waiting" | "ended";

export interface RunFilter {
  readonly status: StatusFilter;
  /** Words that must all appear in the prompt, the origin, the model or the id (any case). */
  readonly text: string;
}

function statusMatches(status: RunStatus, filter: StatusFilter): boolean {
  if (filter === "active") return status === "running" || status === "suspended";
  if (filter === "waiting") return status === "suspended";
  if (filter === "ended") return status === "completed" || status === "failed";
  return true;
}

export function matches(row: RunRow, filter: RunFilter): boolean {
  if (!statusMatches(row.status, filter.status)) return false;
  const haystack = [row.prompt, originLabel(row.origin), row.origin.notebookPath ?? "", row.model, row.requestId].join("\n").toLowerCase();
  return filter.text
    .toLowerCase()
    .split(/\s+/)
    .filter(Boolean)
    .every((word) => haystack.includes(word));
}

/**
 * The rows the list shows: runs a user or a client started. Sub-agents and crew tasks are shown
 * inside their parent's view, as the cell widget shows them, unless the search names them.
 */
export function listed(rows: readonly RunRow[], filter: RunFilter): RunRow[] {
  return rows.filter((row) => (row.parent === null || filter.text.trim() !== "") && matches(row, filter));
}

/** Runs waiting for the user's decision or answer, oldest first (the order they asked in). */
export function waiting(rows: readonly RunRow[]): RunRow[] {
  return rows.filter((row) => row.pendingAsk !== null).sort((a, b) => a.created - b.created);
}

/** How long ago, in the largest whole unit. */
export function ago(created: number, nowSeconds: number): string {
  const seconds = Math.max(0, Math.round(nowSeconds - created));
  if (seconds < 60) return `${seconds}s ago`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m ago`;
  if (seconds < 86_400) return `${Math.floor(seconds / 3600)}h ago`;
  return `${Math.floor(seconds / 86_400)}d ago`;
}

export function tokenLabel(tokens: number): string {
  if (tokens >= 1_000_000) return `${(tokens / 1_000_000).toFixed(1)}M tok`;
  if (tokens >= 1000) return `${(tokens / 1000).toFixed(1)}k tok`;
  return `${tokens} tok`;
}

export const STATUS_LABELS: Readonly<Record<RunStatus, string>> = {
  running: "Running",
  suspended: "Waiting",
  completed: "Done",
  failed: "Failed",
};
