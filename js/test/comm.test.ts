/**
 * The two sides of the comm agree: the kinds this side knows are the schema's (written by the
 * Python side), and the messages it builds are the shared fixture's, which the Python side parses
 * (tests/widgets/test_protocol.py).
 */
import { describe, expect, it, vi } from "vitest";
import schema from "../schema/comm.schema.json";
import {
  ACTION_NAMES,
  KERNEL_MESSAGE_KINDS,
  TRAIT_NAMES,
  VIEW_MESSAGE_KINDS,
  actionMessage,
  readKernelMessage,
  replayMessage,
  unsubscribeMessage,
} from "../src/comm";
import messages from "./fixtures/comm_messages.json";

interface Def {
  readonly properties: Record<string, { const?: unknown; type?: string; anyOf?: { type: string }[] }>;
  readonly required?: readonly string[];
}

type Mapping = Record<string, string | { discriminator: { mapping: Record<string, string> } }>;

const defs = schema.$defs as unknown as Record<string, Def>;
const union = (name: "viewMessage" | "kernelMessage"): Mapping =>
  (schema.properties[name] as unknown as { discriminator: { mapping: Mapping } }).discriminator.mapping;
const actions = (): Record<string, string> => {
  const nested = union("viewMessage")["action"];
  if (typeof nested !== "object") throw new Error("actions are not a nested union");
  return nested.discriminator.mapping;
};

/** The schema's definition for a message: by `kind`, then by `action`. */
function defOf(message: Record<string, unknown>, side: "viewMessage" | "kernelMessage"): Def {
  const entry = union(side)[String(message["kind"])];
  const ref = typeof entry === "object" ? actions()[String(message["action"])] : entry;
  const def = ref ? defs[ref.replace("#/$defs/", "")] : undefined;
  if (!def) throw new Error(`no schema for ${JSON.stringify(message)}`);
  return def;
}

function typeOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value;
}

/** Every required field there, no field the schema does not name, consts and types as it says. */
function expectConforms(message: Record<string, unknown>, side: "viewMessage" | "kernelMessage"): void {
  expectConformsTo(message, defOf(message, side));
}

function expectConformsTo(message: Record<string, unknown>, def: Def): void {
  for (const field of def.required ?? []) expect(message, `${field} is required`).toHaveProperty(field);
  for (const [field, value] of Object.entries(message)) {
    const spec = def.properties[field];
    expect(spec, `${field} is not in the schema`).toBeDefined();
    if (spec?.const !== undefined) expect(value).toBe(spec.const);
    const types = spec?.type ? [spec.type] : (spec?.anyOf ?? []).map((t) => t.type);
    if (types.length > 0) expect(types, `${field}: ${typeOf(value)}`).toContain(typeOf(value));
  }
}

describe("the comm protocol", () => {
  it("knows the schema's kinds, actions and traits, no more and no fewer", () => {
    expect([...KERNEL_MESSAGE_KINDS].sort()).toEqual(Object.keys(union("kernelMessage")).sort());
    expect([...VIEW_MESSAGE_KINDS].sort()).toEqual(Object.keys(union("viewMessage")).sort());
    expect([...ACTION_NAMES].sort()).toEqual(Object.keys(actions()).sort());
    expect([...TRAIT_NAMES].sort()).toEqual(Object.keys(defs["WidgetTraits"]!.properties).sort());
  });

  it("builds exactly the view messages both sides test against, each as the schema describes it", () => {
    const built = [
      replayMessage(-1),
      replayMessage(7, "r_child"),
      unsubscribeMessage("r_child"),
      actionMessage({ action: "resume", requestId: "r_1", askId: "ask_1", approved: true, always: false }),
      actionMessage({ action: "resume", requestId: "r_child", askId: "cl_1", answer: "b" }),
      actionMessage({ action: "terminate", requestId: "r_1" }),
      actionMessage({ action: "retry", requestId: "r_1" }),
      actionMessage({ action: "input", requestId: "r_1", content: "more" }),
    ];
    expect(built).toEqual(messages.view);
    for (const message of built) expectConforms({ ...message }, "viewMessage");
  });

  it("reads every kernel message of the fixture as it is; the fixture is as the schema describes", () => {
    for (const message of messages.kernel) {
      expectConforms(message, "kernelMessage");
      expect(readKernelMessage(message)).toEqual(message);
    }
  });

  it("has the crew board's own messages in it, as the fixture both sides test against has them", () => {
    const mapping = (schema.properties.boardMessage as unknown as { discriminator: { mapping: Record<string, string> } })
      .discriminator.mapping;
    expect(Object.keys(mapping).sort()).toEqual(["control", "decide"]);
    for (const message of messages.board) {
      const ref = mapping[message.type];
      expect(ref, message.type).toBeDefined();
      expectConformsTo(message, defs[ref!.replace("#/$defs/", "")]!);
    }
  });

  it("ignores a kernel message of an unknown kind with a warning, never throwing", () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    expect(readKernelMessage({ kind: "telepathy" })).toBeNull();
    expect(readKernelMessage(42)).toBeNull();
    expect(readKernelMessage({ kind: "events" })).toBeNull();
    expect(warn).toHaveBeenCalledTimes(3);
    warn.mockRestore();
  });
});
