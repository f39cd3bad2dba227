/**
 * The sub-agent panel: a row per child run of each batch the run delegated (name, task and role, a
 * live status line, tokens, duration, the start of its answer), each expandable into the child's own
 * live run view (the same view, following the child's stream), and a child's permission ask or
 * question answerable in place: the action names the child's run.
 *
 * Everything a child row shows was written by a model (the parent's task, the child's answer and
 * status): the task and status go in as text, the start of the answer as markdown through the
 * same sanitiser as every answer.
 */
import { childLifetime } from "../lifetime";
import { renderMarkdown } from "../markdown";
import { loadImagesOnClick } from "../sanitize";
import { valuesOf, type RunState, type SubagentBatch, type SubagentChild } from "../state";
import { button, h, setData, setText, setVisible } from "./dom";
import { formatCount, formatDuration } from "./format";
import type { Part, ViewContext } from "./part";
import { ClarifyPart, PermissionPart } from "./prompts";

const STATUS_LABELS: Readonly<Record<string, string>> = {
  queued: "Queued",
  running: "Running",
  suspended: "Waiting",
  completed: "Done",
  failed: "Failed",
  stopped: "Stopped",
};

export function childStatusLabel(child: SubagentChild): string {
  if (child.permission) return "Waiting for your approval";
  if (child.clarify) return "Waiting for your answer";
  return STATUS_LABELS[shownStatus(child)] ?? child.status;
}

/** A child stopped (by the user, or with its parent) did not fail: it shows as stopped. */
function shownStatus(child: SubagentChild): string {
  return child.status === "failed" && child.errorCode === "USER_CANCELLED" ? "stopped" : child.status;
}

/** The label, and what the child is doing when that says more (and it is not waiting for you). */
export function childStatusLine(child: SubagentChild): string {
  const label = childStatusLabel(child);
  const waiting = child.permission !== null || child.clarify !== null;
  const line = child.message?.trim() ?? "";
  return line && !waiting && line.toLowerCase() !== label.toLowerCase() ? `${label} · ${line}` : label;
}

/** Tokens and duration, as far as the parent's stream told them. */
export function childMeta(child: SubagentChild): string {
  const parts: string[] = [];
  if (child.totalTokens !== undefined) parts.push(`${formatCount(child.totalTokens)} tokens`);
  if (child.durationMs !== undefined) parts.push(formatDuration(child.durationMs));
  return parts.join(" · ");
}

/** One child: its summary line, its prompts, and (opened) its own run view. */
class ChildRow {
  readonly element: HTMLElement;
  private readonly toggle: HTMLButtonElement;
  private readonly name = h("span", { className: "neta-subagent-name", testid: "neta-subagent-name" });
  private readonly task = h("span", { className: "neta-subagent-task", testid: "neta-subagent-task" });
  /** Its role prompt, on one line (it may be long): the whole of it in the child's own view. */
  private readonly role = h("div", { className: "neta-subagent-role", testid: "neta-subagent-role" });
  private readonly status = h("span", { className: "neta-subagent-status", testid: "neta-subagent-status" });
  private readonly meta = h("span", { className: "neta-subagent-meta", testid: "neta-subagent-meta" });
  private readonly preview = h("div", { className: "neta-subagent-preview", testid: "neta-subagent-preview" });
  private readonly failure = h("div", { className: "neta-subagent-error", testid: "neta-subagent-error" });
  private readonly body = h("div", { className: "neta-subagent-run", testid: "neta-subagent-run" });
  private readonly permission: PermissionPart;
  private readonly clarify: ClarifyPart;
  private shown: SubagentChild | null = null;
  private shownPreview = "";
  /** The open child view's lifetime; null while closed. */
  private open: AbortController | null = null;

  constructor(private readonly ctx: ViewContext, private readonly requestId: string) {
    // Answers from this row are for the child's run, not the parent's.
    const childCtx: ViewContext = { ...ctx, act: (action) => ctx.act(action, requestId) };
    this.permission = new PermissionPart(childCtx);
    this.clarify = new ClarifyPart(childCtx);
    this.toggle = h("button", { className: "neta-subagent-toggle", testid: "neta-subagent-toggle", attrs: { type: "button" } }, [
      h("span", { className: "neta-subagent-caret" }),
      this.name,
      this.task,
    ]);
    const fold = `subagent:${requestId}`;
    this.toggle.addEventListener("click", () => {
      this.element.dataset["fold"] = fold;
      this.setOpen(this.open === null);
    });
    const line = h("div", { className: "neta-subagent-line" }, [this.toggle, this.status, this.meta]);
    this.element = h("li", { className: "neta-subagent", testid: "neta-subagent" }, [
      line,
      this.role,
      this.preview,
      this.failure,
      this.permission.element,
      this.clarify.element,
      this.body,
    ]);
    this.element.dataset["requestId"] = requestId;
    loadImagesOnClick(this.preview);
    setVisible(this.body, false);
    // As the user left it in the last view of the run (folds.ts): opened, it shows the child live.
    const open = ctx.fold(fold);
    if (open !== undefined) this.element.dataset["fold"] = fold;
    this.setOpen(open === true);
  }

  render(child: SubagentChild): void {
    if (child === this.shown) return;
    this.shown = child;
    const name = child.agentId && child.agentId !== child.requestId ? child.agentId : "";
    setText(this.name, name);
    setVisible(this.name, name !== "");
    setText(this.task, child.task || child.requestId);
    setText(this.role, child.role ?? "");
    setVisible(this.role, Boolean(child.role));
    setText(this.status, childStatusLine(child));
    setData(this.element, "status", shownStatus(child));
    setText(this.meta, childMeta(child));
    setVisible(this.meta, this.meta.textContent !== "");
    const preview = child.answerPreview ? `${child.answerPreview}${child.answerTruncated ? "…" : ""}` : "";
    if (preview !== this.shownPreview) {
      this.shownPreview = preview;
      // Markdown, as the child's answer is in its own view: sanitised like every answer.
      this.preview.innerHTML = preview ? renderMarkdown(preview) : "";
    }
    setVisible(this.preview, preview !== "" && this.open === null);
    const failure = shownStatus(child) === "failed" ? `${child.errorMessage || "The sub-agent failed"}${child.errorCode ? ` (${child.errorCode})` : ""}` : "";
    setText(this.failure, failure);
    setVisible(this.failure, failure !== "");
    this.showPrompts();
  }

  /** Opened, the child's own view shows its prompts; closed, this row does. */
  private showPrompts(): void {
    const inRow = this.open === null ? this.shown : null;
    this.permission.show(inRow?.permission ?? null);
    this.clarify.show(inRow?.clarify ?? null);
  }

  private setOpen(open: boolean): void {
    const showRun = this.ctx.showRun;
    this.open?.abort();
    this.open = null;
    this.body.replaceChildren();
    if (open && showRun) {
      this.open = childLifetime(this.ctx.signal);
      showRun(this.requestId, this.body, this.open.signal);
    }
    setVisible(this.body, this.open !== null);
    this.toggle.setAttribute("aria-expanded", String(this.open !== null));
    this.toggle.disabled = !showRun;
    setData(this.element, "open", String(this.open !== null));
    if (this.shown) {
      setVisible(this.preview, Boolean(this.shown.answerPreview) && this.open === null);
      this.showPrompts();
    }
  }

  dispose(): void {
    this.open?.abort();
    this.permission.dispose();
    this.clarify.dispose();
  }
}

/** One batch: a title with its progress, and its children's rows. */
class BatchSection {
  readonly element: HTMLElement;
  private readonly title = h("div", { className: "neta-section-title neta-subagent-title", testid: "neta-subagent-title" });
  private readonly list = h("ul", { className: "neta-subagent-list" });
  private readonly rows = new Map<string, ChildRow>();

  constructor(private readonly ctx: ViewContext, batchId: string) {
    this.element = h("div", { className: "neta-subagent-batch", testid: "neta-subagent-batch" }, [this.title, this.list]);
    this.element.dataset["batchId"] = batchId;
  }

  render(batch: SubagentBatch, state: RunState): void {
    const children = batch.children.map((id) => state.children.byId[id]).filter((c): c is SubagentChild => c !== undefined);
    const ended = children.filter((c) => c.status === "completed" || c.status === "failed").length;
    const count = children.length === 1 ? "1 sub-agent" : `${children.length} sub-agents`;
    // Once the batch ended, the server's word for how (all done, some failed, stopped with the run).
    const progress = batch.done ? (batch.message ?? "finished") : `${ended} of ${children.length} done`;
    setText(this.title, `${count} · ${progress}`);
    setData(this.element, "done", String(batch.done));
    for (const child of children) {
      let row = this.rows.get(child.requestId);
      if (!row) {
        row = new ChildRow(this.ctx, child.requestId);
        this.rows.set(child.requestId, row);
        this.list.append(row.element);
      }
      row.render(child);
    }
  }

  dispose(): void {
    for (const row of this.rows.values()) row.dispose();
  }
}

export class SubagentPart implements Part {
  readonly element = h("div", { className: "neta-subagents", testid: "neta-subagents" });
  private readonly sections = new Map<string, BatchSection>();

  constructor(private readonly ctx: ViewContext) {
    setVisible(this.element, false);
  }

  render(state: RunState, prev: RunState | null): void {
    if (prev && state.subagents === prev.subagents && state.children === prev.children) return;
    if (!prev) this.clear();
    for (const batch of valuesOf(state.subagents)) {
      let section = this.sections.get(batch.batchId);
      if (!section) {
        section = new BatchSection(this.ctx, batch.batchId);
        this.sections.set(batch.batchId, section);
        this.element.append(section.element);
      }
      section.render(batch, state);
    }
    setVisible(this.element, this.sections.size > 0);
  }

  dispose(): void {
    this.clear();
  }

  /** A fresh start (a replay from the beginning): no row of before is kept. */
  private clear(): void {
    for (const section of this.sections.values()) section.dispose();
    this.sections.clear();
    this.element.replaceChildren();
  }
}
