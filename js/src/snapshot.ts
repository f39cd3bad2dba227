/**
 * The `snapshot` trait: a small summary of the run written into the widget model, so a saved
 * notebook keeps the answer even where the run can no longer be followed.
 */
import { finalText, initialState, type RunState, type RunStatus } from "./state";
import { isRecord, str } from "./wire";

export interface Snapshot {
  readonly requestId: string;
  readonly status: RunStatus;
  readonly finalText: string;
  readonly lastSeq: number;
  readonly errorMessage?: string;
  /** Why a suspended run waits (`PERMISSION_ASK`, …), so a reload labels it right at once. */
  readonly suspendReason?: string;
}

const STATUSES: readonly RunStatus[] = ["idle", "running", "suspended", "completed", "failed"];

export function snapshotOf(state: RunState): Snapshot {
  const snapshot: Snapshot = {
    requestId: state.requestId ?? "",
    status: state.status,
    finalText: finalText(state),
    lastSeq: state.lastSeq,
  };
  const errorMessage = state.status === "failed" ? state.failure?.errorMessage : undefined;
  const suspendReason = state.status === "suspended" ? state.suspendReason?.type : undefined;
  return { ...snapshot, ...(errorMessage ? { errorMessage } : {}), ...(suspendReason ? { suspendReason } : {}) };
}

/** What to show from a saved snapshot until (or unless) live events arrive; null when empty. */
export function stateFromSnapshot(value: unknown): RunState | null {
  if (!isRecord(value)) return null;
  const text = str(value["finalText"]) ?? "";
  const status = STATUSES.find((s) => s === value["status"]);
  const errorMessage = str(value["errorMessage"]);
  const suspendReason = status === "suspended" ? str(value["suspendReason"]) : undefined;
  if (!text && !status && !errorMessage) return null;
  const base = initialState(str(value["requestId"]) || null);
  return {
    ...base,
    status: status ?? "idle",
    answer: text ? [{ text, open: false, synthetic: false }] : [],
    failure: errorMessage ? { errorCode: "", errorMessage, recoverable: false, networkError: false } : null,
    suspendReason: suspendReason ? { type: suspendReason } : null,
  };
}

/**
 * Writes at most one snapshot per interval, and as soon as the run reaches a resting status (in a
 * task of its own: the snapshot holds the whole answer, and writing it sends it to the kernel).
 */
export class SnapshotWriter {
  private latest: RunState | null = null;
  /** What was written last: the same run, status and seq mean the same snapshot. */
  private written: Pick<RunState, "requestId" | "status" | "lastSeq"> | null = null;
  private timer: unknown = null;
  private scheduledMs = Number.POSITIVE_INFINITY;

  constructor(
    private readonly write: (snapshot: Snapshot) => void,
    private readonly timers: { setTimeout(cb: () => void, ms: number): unknown; clearTimeout(handle: unknown): void },
    private readonly intervalMs = 1000,
  ) {}

  push(state: RunState): void {
    this.latest = state;
    const resting = state.status === "completed" || state.status === "failed" || state.status === "suspended";
    this.schedule(resting && state.status !== this.written?.status ? 0 : this.intervalMs);
  }

  flush(): void {
    this.cancel();
    const state = this.latest;
    if (!state) return;
    const last = this.written;
    if (last && last.requestId === state.requestId && last.status === state.status && last.lastSeq === state.lastSeq) return;
    this.written = { requestId: state.requestId, status: state.status, lastSeq: state.lastSeq };
    this.write(snapshotOf(state));
  }

  /** Write within `ms`, or sooner if a write is already due sooner. */
  private schedule(ms: number): void {
    if (this.timer !== null && this.scheduledMs <= ms) return;
    this.cancel();
    this.scheduledMs = ms;
    this.timer = this.timers.setTimeout(() => this.flush(), ms);
  }

  private cancel(): void {
    if (this.timer !== null) this.timers.clearTimeout(this.timer);
    this.timer = null;
    this.scheduledMs = Number.POSITIVE_INFINITY;
  }

  dispose(): void {
    this.flush();
  }
}
