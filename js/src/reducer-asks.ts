/** Reading what a run waits for: a permission ask or a clarify question (its own, or a child's). */
import type { ClarifyData, PermissionAskData } from "./events";
import type { AskPreview, ClarifyRequest, PermissionAsk } from "./state";
import { readMcp } from "./reducer-tools";
import { bool, id, isRecord, str, strList, type Loose } from "./wire";

export function readPermission(data: Loose<PermissionAskData>): PermissionAsk | null {
  const askId = id(data.askId);
  if (!askId) return null;
  return {
    askId,
    toolName: str(data.toolName) ?? "",
    mcp: readMcp(data),
    toolCallId: id(data.toolCallId),
    arguments: str(data.arguments) ?? "",
    ruleDescription: str(data.ruleDescription),
    rulePattern: str(data.rulePattern),
    preview: readPreview((data as Record<string, unknown>)["preview"]),
    digest: str(data.digest),
  };
}

/** A notebook tool's preview (`diff` or `code`); anything else is ignored. */
function readPreview(value: unknown): AskPreview | undefined {
  if (!isRecord(value)) return undefined;
  const kind = value["kind"];
  const text = str(value["text"]);
  if ((kind !== "diff" && kind !== "code") || text === undefined) return undefined;
  return { kind, text, cellId: str(value["cellId"]), stale: bool(value["stale"]) ?? false };
}

export function readClarify(data: Loose<ClarifyData>): ClarifyRequest | null {
  const clarifyId = id(data.clarifyId);
  if (!clarifyId) return null;
  return { clarifyId, question: str(data.question) ?? "", options: strList(data.options) };
}
