/** Reading what a run waits for: a permission ask or a clarify question (its own, or a child's). */
import type { ClarifyData, PermissionAskData } from "./events";
import type { ClarifyRequest, PermissionAsk } from "./state";
import { id, str, strList, type Loose } from "./wire";

export function readPermission(data: Loose<PermissionAskData>): PermissionAsk | null {
  const askId = id(data.askId);
  if (!askId) return null;
  return {
    askId,
    toolName: str(data.toolName) ?? "",
    toolCallId: id(data.toolCallId),
    arguments: str(data.arguments) ?? "",
    ruleDescription: str(data.ruleDescription),
    rulePattern: str(data.rulePattern),
  };
}

export function readClarify(data: Loose<ClarifyData>): ClarifyRequest | null {
  const clarifyId = id(data.clarifyId);
  if (!clarifyId) return null;
  return { clarifyId, question: str(data.question) ?? "", options: strList(data.options) };
}
