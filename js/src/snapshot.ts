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
  return errorMessage ? { ...snapshot, errorMessage } : snapshot;
}

/** What to show from a saved snapshot until (or unless) live events arrive; null when empty. */
export function stateFromSnapshot(value: unknown): RunState | null {
  if (!isRecord(value)) return null;
  const text = str(value["finalText"]) ?? "";
  const status = STATUSES.find((s) => s === value["status"]);
  const errorMessage = str(value["errorMessage"]);
  if (!text && !status && !errorMessage) return null;
  const base = initialState(str(value["requestId"]) || null);
  return {
    ...base,
    status: status ?? "idle",
    answer: text ? [{ text, open: false, synthetic: false }] : [],
    failure: errorMessage ? { errorCode: "", errorMessage, recoverable: false, networkError: false } : null,
  };
}

/** Writes at most one snapshot per interval, and at once when the run reaches a resting status. */
export class SnapshotWriter {
  private latest: RunState | null = null;
  private written = "";
  private writtenStatus: RunStatus | null = null;
  private timer: unknown = null;

  constructor(
    private readonly write: (snapshot: Snapshot) => void,
    private readonly timers: { setTimeout(cb: () => void, ms: number): unknown; clearTimeout(handle: unknown): void },
    private readonly intervalMs = 1000,
  ) {}

  push(state: RunState): void {
    this.latest = state;
    const resting = state.status === "completed" || state.status === "failed" || state.status === "suspended";
    if (resting && state.status !== this.writtenStatus) {
      this.flush();
    } else if (this.timer === null) {
      this.timer = this.timers.setTimeout(() => this.flush(), this.intervalMs);
    }
  }

  flush(): void {
    if (this.timer !== null) this.timers.clearTimeout(this.timer);
    this.timer = null;
    if (!this.latest) return;
    const snapshot = snapshotOf(this.latest);
    const key = JSON.stringify(snapshot);
    if (key === this.written) return;
    this.written = key;
    this.writtenStatus = snapshot.status;
    this.write(snapshot);
  }

  dispose(): void {
    this.flush();
  }
}
