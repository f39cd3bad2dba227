/**
 * A unified diff as text: one span per line, its class from its first character. The diff holds
 * cell sources the model wrote, so nothing of it is ever parsed as HTML.
 */
import { h } from "./dom";

function lineClass(line: string): string {
  if (line.startsWith("+++") || line.startsWith("---")) return "neta-diff-meta";
  if (line.startsWith("@@")) return "neta-diff-hunk";
  if (line.startsWith("+")) return "neta-diff-add";
  if (line.startsWith("-")) return "neta-diff-del";
  return "neta-diff-context";
}

export function diffBlock(diff: string, testid = "neta-diff"): HTMLElement {
  const lines = diff.replace(/\n$/, "").split("\n");
  const spans = lines.map((line) => h("span", { className: `neta-diff-line ${lineClass(line)}`, text: `${line}\n` }));
  return h("pre", { className: "neta-pre neta-diff", testid }, spans);
}
