/** The loop's decisions (seed 004): its phase, steps without progress, why it stopped. */
import type { PhaseData, ProgressData, StopReasonData } from "./events";
import type { RunState } from "./state";
import { num, str, strList, type Loose } from "./wire";

export function applyPhase(state: RunState, data: Loose<PhaseData>): RunState {
  const phase = str(data.phase);
  if (!phase) return state;
  return { ...state, phase: { phase, toolNames: strList(data.toolNames) } };
}

export function applyProgress(state: RunState, data: Loose<ProgressData>): RunState {
  const count = num(data.noProgressCount);
  return count === undefined ? state : { ...state, noProgress: count };
}

export function applyStopReason(state: RunState, data: Loose<StopReasonData>): RunState {
  const reason = str(data.reason);
  return reason ? { ...state, stopReason: reason } : state;
}
