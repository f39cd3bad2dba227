/** The process timeline (seed 000): operations nested by parentOperationId, with progress bars. */
import type { ProcessOperation, RunState } from "../state";
import { valuesOf } from "../state";
import { h, setVisible } from "./dom";
import type { Part } from "./part";

/** Percent done, from `percent` or `current/total`; null when the operation reports neither. */
export function progressOf(op: ProcessOperation): number | null {
  if (op.percent !== undefined) return Math.max(0, Math.min(100, op.percent));
  if (op.current !== undefined && op.total !== undefined && op.total > 0) {
    return Math.max(0, Math.min(100, (op.current / op.total) * 100));
  }
  return null;
}

/** Children by parent id; operations whose parent is unknown become roots. */
function childrenByParent(ops: readonly ProcessOperation[]): Map<string | null, ProcessOperation[]> {
  const known = new Set(ops.map((op) => op.operationId));
  const tree = new Map<string | null, ProcessOperation[]>();
  for (const op of ops) {
    const parent = op.parentOperationId && known.has(op.parentOperationId) && op.parentOperationId !== op.operationId
      ? op.parentOperationId
      : null;
    tree.set(parent, [...(tree.get(parent) ?? []), op]);
  }
  return tree;
}

function progressBar(op: ProcessOperation): HTMLElement | null {
  const percent = progressOf(op);
  const counts = op.current !== undefined && op.total !== undefined ? `${op.current}/${op.total}` : "";
  if (percent === null && !counts) return null;
  const bar = h("div", { className: "neta-progress-bar" });
  bar.style.width = `${percent ?? 0}%`;
  const label = [counts, percent !== null ? `${Math.round(percent)}%` : ""].filter(Boolean).join(" · ");
  return h("div", { className: "neta-progress-row" }, [
    h("div", {
      className: "neta-progress",
      attrs: { role: "progressbar", "aria-valuemin": "0", "aria-valuemax": "100", "aria-valuenow": String(Math.round(percent ?? 0)) },
    }, [bar]),
    h("span", { className: "neta-progress-label", text: label }),
  ]);
}

function operationItem(op: ProcessOperation, tree: Map<string | null, ProcessOperation[]>, seen: Set<string>): HTMLElement {
  seen.add(op.operationId);
  const head = h("div", { className: "neta-op-head" }, [
    h("span", { className: `neta-badge neta-badge-${op.status}`, text: op.status }),
    h("span", { className: "neta-op-stage", text: op.stage ?? op.operationId }),
    h("span", { className: "neta-op-message", text: op.message ?? "" }),
  ]);
  const item = h("li", { className: `neta-op neta-level-${op.level}`, testid: "neta-process-op" }, [head]);
  item.dataset["operationId"] = op.operationId;
  item.dataset["status"] = op.status;
  const bar = progressBar(op);
  if (bar) item.append(bar);
  const children = (tree.get(op.operationId) ?? []).filter((child) => !seen.has(child.operationId));
  if (children.length > 0) item.append(h("ul", { className: "neta-ops" }, children.map((c) => operationItem(c, tree, seen))));
  return item;
}

export class ProcessPart implements Part {
  readonly element = h("div", { className: "neta-process", testid: "neta-process" });

  constructor() {
    setVisible(this.element, false);
  }

  render(state: RunState, prev: RunState | null): void {
    if (prev && state.processes === prev.processes) return;
    const ops = valuesOf(state.processes);
    setVisible(this.element, ops.length > 0);
    const tree = childrenByParent(ops);
    const seen = new Set<string>();
    const roots = (tree.get(null) ?? []).map((op) => operationItem(op, tree, seen));
    // Parent links that form a cycle leave no root: show those operations flat.
    for (const op of ops) if (!seen.has(op.operationId)) roots.push(operationItem(op, tree, seen));
    this.element.replaceChildren(h("ul", { className: "neta-ops neta-ops-root" }, roots));
  }
}
