/**
 * The wire as it really arrives: untrusted JSON shaped like the generated types in `events.ts`.
 *
 * The server only ever adds event types, `data.type` values and fields (seed 003 §10), and may
 * send nulls or leave fields out, so every value is read through a checking accessor instead of
 * being trusted to match the generated interface.
 */
import { EVENT_TYPES } from "./catalogue";
import type { AgentEvent, Data, EventType } from "./events";

/** Every field of `T` may be missing or of any type: read it with the accessors below. */
export type Loose<T> = { readonly [K in keyof T]?: unknown };

/** The body type of one `data.type` value, e.g. `Body<"tool">` is `ToolData`. */
export type Body<T extends string> = Extract<Data, { type?: T }>;

/** An envelope as received; only `eventType` is required to look at it at all. */
export type Envelope = Loose<Omit<AgentEvent, "data">> & { readonly data?: unknown };

/** Known event types at run time, generated with the schema from the same declarations. */
export { EVENT_TYPES } from "./catalogue";

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : never) : never;
// Fails to compile when the schema gains or loses an event type and this list does not follow.
const eventTypesMatchSchema: Same<(typeof EVENT_TYPES)[number], EventType> = true;
void eventTypesMatchSchema;

export const TERMINAL_EVENT_TYPES: ReadonlySet<string> = new Set<EventType>([
  "MESSAGE_COMPLETED",
  "MESSAGE_SUSPENDED",
  "MESSAGE_FAILED",
]);

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function str(value: unknown): string | undefined {
  return typeof value === "string" ? value : undefined;
}

/** Ids are strings on our wire, numbers in the seed's examples: accept both. */
export function id(value: unknown): string | undefined {
  if (typeof value === "string") return value;
  if (typeof value === "number" && Number.isFinite(value)) return String(value);
  return undefined;
}

export function num(value: unknown): number | undefined {
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}

export function bool(value: unknown): boolean | undefined {
  return typeof value === "boolean" ? value : undefined;
}

export function strList(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === "string") : [];
}

/** The seq of an envelope, or undefined when it has none (HEARTBEAT) or it is not a number. */
export function seqOf(envelope: unknown): number | undefined {
  if (!isRecord(envelope)) return undefined;
  const seq = num(envelope["seq"]);
  return seq !== undefined && Number.isInteger(seq) && seq >= 0 ? seq : undefined;
}

export function isTerminal(envelope: unknown): boolean {
  return isRecord(envelope) && TERMINAL_EVENT_TYPES.has(String(envelope["eventType"]));
}
