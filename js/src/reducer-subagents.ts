/**
 * Sub-agents, as the parent's stream tells of them: SUBAGENT_RUN_STARTED announces a batch and its
 * child runs, one SUBAGENT_EVENT follows per change of a child (only the fields it carries
 * change), SUBAGENT_RUN_COMPLETED ends the batch. What a child waits for (its permission ask or
 * question) is kept with it, so the parent's view can answer it in place.
 */
import type { SubagentChild as WireChild, SubagentData } from "./events";
import { readClarify, readPermission } from "./reducer-asks";
import { sameRequest, upsert, type ClarifyRequest, type Keyed, type PermissionAsk, type RunState, type SubagentBatch, type SubagentChild } from "./state";
import { bool, id, isRecord, num, str, type Loose } from "./wire";

function newChild(requestId: string, batchId: string): SubagentChild {
  return { requestId, batchId, task: "", status: "queued", answerTruncated: false, permission: null, clarify: null };
}

/** The children SUBAGENT_RUN_STARTED lists, added to (or updated in) `children`. */
function announce(children: Keyed<SubagentChild>, batchId: string, listed: readonly unknown[]): [Keyed<SubagentChild>, string[]] {
  const ids: string[] = [];
  let next = children;
  for (const item of listed) {
    if (!isRecord(item)) continue;
    const wire = item as Loose<WireChild>;
    const requestId = id(wire.requestId);
    if (!requestId || ids.includes(requestId)) continue;
    ids.push(requestId);
    next = upsert(next, requestId, (prev) => {
      const child = prev ?? newChild(requestId, batchId);
      return {
        ...child,
        agentId: id(wire.agentId) ?? child.agentId,
        task: str(wire.task) ?? child.task,
        role: str(wire.role) ?? child.role,
        model: str(wire.model) ?? child.model,
        status: prev ? child.status : (str(wire.status) ?? child.status),
      };
    });
  }
  return [next, ids];
}

/** The child a SUBAGENT_EVENT is about: by its requestId, else by its agentId within the batch. */
function childOf(state: RunState, batch: SubagentBatch | undefined, data: Loose<SubagentData>): string | undefined {
  const requestId = id(data.childRequestId);
  if (requestId) return requestId;
  const agentId = id(data.agentId);
  if (!agentId || !batch) return undefined;
  return batch.children.find((child) => state.children.byId[child]?.agentId === agentId);
}

/** The same request as `prev` (told again with the child's next change) keeps `prev`, so its prompt stays armed. */
function same<T extends PermissionAsk | ClarifyRequest>(prev: T | null, next: T | null): T | null {
  return sameRequest(prev, next) ? prev : next;
}

/** A new ask replaces the one before; a child that moved on (not suspended) waits for nothing. */
function waitsFor(child: SubagentChild, ask: Record<string, unknown> | null, status: string): Pick<SubagentChild, "permission" | "clarify"> {
  if (ask) {
    return {
      permission: same(child.permission, ask["type"] === "permission_ask" ? readPermission(ask) : null),
      clarify: same(child.clarify, ask["type"] === "clarify" ? readClarify(ask) : null),
    };
  }
  return status === "suspended" ? { permission: child.permission, clarify: child.clarify } : { permission: null, clarify: null };
}

function changed(child: SubagentChild, data: Loose<SubagentData>): SubagentChild {
  const status = str(data.status) ?? child.status;
  return {
    ...child,
    agentId: id(data.agentId) ?? child.agentId,
    status,
    message: str(data.message) ?? child.message,
    step: num(data.step) ?? child.step,
    totalTokens: num(data.totalTokens) ?? child.totalTokens,
    durationMs: num(data.durationMs) ?? child.durationMs,
    answerPreview: str(data.answerPreview) ?? child.answerPreview,
    answerTruncated: bool(data.answerTruncated) ?? child.answerTruncated,
    errorCode: str(data.errorCode) ?? child.errorCode,
    errorMessage: str(data.errorMessage) ?? child.errorMessage,
    ...waitsFor(child, isRecord(data.ask) ? data.ask : null, status),
  };
}

function applyChildEvent(state: RunState, batch: SubagentBatch | undefined, batchId: string, data: Loose<SubagentData>): RunState {
  const requestId = childOf(state, batch, data);
  if (!requestId) return state;
  const children = upsert(state.children, requestId, (prev) => changed(prev ?? newChild(requestId, batchId), data));
  const known = batch?.children.includes(requestId) ?? false;
  if (known) return { ...state, children };
  // A child the batch did not announce (an event of a newer server, or a replay cut short).
  const subagents = upsert(state.subagents, batchId, (prev) => ({
    ...(prev ?? { batchId, done: false, events: 0, children: [] }),
    children: [...(prev?.children ?? []), requestId],
  }));
  return { ...state, children, subagents };
}

export function applySubagent(state: RunState, data: Loose<SubagentData>, _seq: number, eventType: string): RunState {
  const batchId = id(data.batchId);
  if (!batchId) return state;
  let children = state.children;
  let announced: string[] = [];
  if (eventType === "SUBAGENT_RUN_STARTED" && Array.isArray(data.children)) {
    [children, announced] = announce(children, batchId, data.children);
  }
  const subagents = upsert(state.subagents, batchId, (prev) => ({
    batchId,
    done: eventType === "SUBAGENT_RUN_COMPLETED" || (prev?.done ?? false),
    status: str(data.status) ?? prev?.status,
    message: str(data.message) ?? prev?.message,
    events: (prev?.events ?? 0) + (eventType === "SUBAGENT_EVENT" ? 1 : 0),
    children: [...(prev?.children ?? []), ...announced.filter((c) => !prev?.children.includes(c))],
  }));
  const next = { ...state, children, subagents };
  if (eventType !== "SUBAGENT_EVENT") return next;
  return applyChildEvent(next, subagents.byId[batchId], batchId, data);
}
