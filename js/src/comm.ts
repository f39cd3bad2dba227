/**
 * The widget's contract with the kernel: the synced traits and the custom comm messages.
 *
 * Its twin is `neta_jupyter/widgets/comm.py`. The types come from the JSON Schema that module
 * writes (`schema/comm.schema.json`, generated into `comm-types.ts`); the lists of kinds below are
 * checked against those types when this compiles, and against the schema by a test. Kinds and
 * fields are only ever added: a message of a kind this side does not know is ignored, with a
 * warning on the console.
 *
 * Kernel → view (`KernelMessage`):
 *   `events`       envelopes of a run, in seq order (at most one message per 50 ms)
 *   `error`        an action failed, a run cannot be followed, or a message was refused
 * View → kernel (`ViewMessage`):
 *   `replay`       send a run's events after `lastSeq`, then its live ones
 *   `unsubscribe`  stop sending a child run's events (its view closed)
 *   `action`       act on a run (`ActionMessage`: resume, terminate, suspend, retry, input)
 *
 * A view follows the widget's own run and may follow the runs it delegated to (its children):
 * `events` and `error` about a child carry the child's `requestId`; without one they are about the
 * widget's own run. An action always names the run it is for.
 */
import type { Action, RunAction } from "./actions";
import type {
  ErrorMessage,
  EventsMessage,
  InputAction,
  KernelMessage,
  ReplayMessage,
  ResumeAction,
  RetryAction,
  SuspendAction,
  TerminateAction,
  UnsubscribeMessage,
  ViewMessage,
  WidgetTraits,
} from "./comm-types";
import { isRecord, str } from "./wire";

export type {
  ErrorMessage,
  EventsMessage,
  KernelMessage,
  ReplayMessage,
  UnsubscribeMessage,
  ViewMessage,
  WidgetTraits,
} from "./comm-types";

/** An action as it travels to the kernel: `kind: "action"`, the action and the run it is for. */
export type ActionMessage = ResumeAction | TerminateAction | SuspendAction | RetryAction | InputAction;

/** The name of a synced trait (Python's spelling: that is how the model knows them). */
export type TraitName = keyof WidgetTraits;

export const KERNEL_MESSAGE_KINDS = ["events", "error"] as const;
export const VIEW_MESSAGE_KINDS = ["replay", "unsubscribe", "action"] as const;
export const ACTION_NAMES = ["resume", "terminate", "suspend", "retry", "input"] as const;
export const TRAIT_NAMES = ["request_id", "mode", "prompt", "snapshot", "waiting"] as const;

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : never) : never;
// Each fails to compile when the schema gains or loses a kind and the list here does not follow.
const kernelKinds: Same<(typeof KERNEL_MESSAGE_KINDS)[number], KernelMessage["kind"]> = true;
const viewKinds: Same<(typeof VIEW_MESSAGE_KINDS)[number], ViewMessage["kind"]> = true;
const actionNames: Same<(typeof ACTION_NAMES)[number], ActionMessage["action"]> = true;
const ownActions: Same<Action["action"], ActionMessage["action"]> = true;
const traitNames: Same<(typeof TRAIT_NAMES)[number], TraitName> = true;
void [kernelKinds, viewKinds, actionNames, ownActions, traitNames];

// --- what the view sends -----------------------------------------------------------------------

/** Ask for a run's events after `lastSeq`; `requestId` only for a run not the widget's own. */
export function replayMessage(lastSeq: number, requestId?: string): ReplayMessage {
  return requestId === undefined ? { kind: "replay", lastSeq } : { kind: "replay", lastSeq, requestId };
}

export function unsubscribeMessage(requestId: string): UnsubscribeMessage {
  return { kind: "unsubscribe", requestId };
}

/** The comm message of an action (the same fields as the run API's body, plus `kind` and `action`). */
export function actionMessage(action: RunAction): ActionMessage {
  return { kind: "action", ...action };
}

// --- what the view receives ----------------------------------------------------------------------

function warn(message: string, detail: unknown): void {
  console.warn(`neta: ${message}`, detail);
}

/**
 * The typed message the kernel sent, or null (and a warning) for one this view cannot use: an
 * unknown kind (a newer kernel) or fields of the wrong type. Never throws.
 */
export function readKernelMessage(raw: unknown): KernelMessage | null {
  if (!isRecord(raw)) {
    warn("ignored a comm message that is not an object", raw);
    return null;
  }
  const requestId = raw["requestId"];
  if (requestId !== undefined && requestId !== null && typeof requestId !== "string") {
    warn("ignored a comm message whose requestId is not a string", raw);
    return null;
  }
  const about = typeof requestId === "string" ? { requestId } : {};
  switch (raw["kind"]) {
    case "events":
      if (Array.isArray(raw["events"])) return { kind: "events", events: raw["events"] as EventsMessage["events"], ...about };
      break;
    case "error":
      return { kind: "error", message: str(raw["message"]) ?? "The kernel reported an error", ...about } satisfies ErrorMessage;
    default:
      warn(`ignored a comm message of unknown kind ${JSON.stringify(raw["kind"])}`, raw);
      return null;
  }
  warn(`ignored a ${String(raw["kind"])} message with fields of the wrong type`, raw);
  return null;
}

/** Whether `message` is about run `requestId`; `own` tells whether that is the widget's own run. */
export function isAbout(message: KernelMessage, requestId: string, own: boolean): boolean {
  const about = message.requestId ?? null;
  return about === null ? own : about === requestId;
}
