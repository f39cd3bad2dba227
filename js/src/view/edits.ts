/**
 * The notebook edits of one tool card: each with its diff and a Revert button, which answers only a
 * deliberate click once in view (guard.ts), like a prompt's buttons: a revert changes the notebook.
 * A refused revert says why (the cell changed after the edit: what it reads now); an edit reverted
 * before a reload shows as reverted (the server's list of the run's edits).
 */
import { onAbort } from "../lifetime";
import type { RevertAnswer } from "../notebook";
import type { NotebookEdit } from "../state";
import { diffBlock } from "./diff";
import { button, h, setData, setText, setVisible } from "./dom";
import { shortIds } from "./format";
import { ArmedControls } from "./guard";
import type { ViewContext } from "./part";

/** Reverting the edits of the view's run (absent where the page cannot: no server). */
export interface EditsAccess {
  revert(editId: string): Promise<RevertAnswer>;
  /** The run's edits reverted so far. */
  reverted(): Promise<ReadonlySet<string>>;
}

const KIND_WORDS: Readonly<Record<string, string>> = {
  insert: "Inserted a cell",
  edit: "Edited a cell",
  delete: "Deleted a cell",
  move: "Moved a cell",
};

/** What the edit did, in words: "Inserted a cell in analysis.ipynb (saved to the file: …)". */
export function editWords(edit: NotebookEdit): string {
  const what = KIND_WORDS[edit.kind] ?? `${edit.kind} of a cell`;
  const where = edit.path ? ` in ${edit.path}` : "";
  const saved = edit.note ? ` (${edit.note})` : edit.via === "file" ? " (the notebook was not open: saved to the file)" : "";
  return `${what}${where}${saved}`;
}

/** The diff's `--- cell …` and `+++ cell …` lines with the cell's id as people read it. */
function shortDiffHeads(diff: string): string {
  return diff.replace(/^(---|\+\+\+) .*$/gm, (line) => shortIds(line));
}

class EditRow {
  readonly element: HTMLElement;
  private readonly state = h("span", { className: "neta-edit-state", testid: "neta-edit-state" });
  private readonly revert = button("Revert", "neta-revert", "neta-button neta-revert");
  private readonly refusal = h("div", { className: "neta-edit-refusal", testid: "neta-revert-refusal", attrs: { role: "alert" } });
  private controls: ArmedControls | null = null;

  constructor(private readonly ctx: ViewContext, private readonly edit: NotebookEdit, access: EditsAccess | undefined) {
    const what = h("span", { className: "neta-edit-what", testid: "neta-edit-what", text: editWords(edit) });
    if (edit.cellId) what.title = `cell ${edit.cellId}`;
    const head = h("div", { className: "neta-edit-head" }, [what, this.state, this.revert]);
    this.element = h("div", { className: "neta-edit", testid: "neta-edit" }, [head, diffBlock(shortDiffHeads(edit.diff)), this.refusal]);
    setData(this.element, "editId", edit.editId);
    setVisible(this.refusal, false);
    this.show("applied");
    if (!access) {
      setVisible(this.revert, false);
      return;
    }
    const controls = new ArmedControls(ctx, ctx.guard, head, [this.revert]);
    this.controls = controls;
    onAbort(ctx.signal, () => controls.dispose());
    controls.on(this.revert, "click", () => void this.send(access, controls));
    void access.reverted().then((ids) => {
      if (ids.has(edit.editId)) this.show("reverted");
    });
  }

  private async send(access: EditsAccess, controls: ArmedControls): Promise<void> {
    controls.setBusy(true);
    const answer = await access.revert(this.edit.editId);
    if (answer.outcome === "reverted") {
      this.show("reverted");
      return;
    }
    controls.setBusy(false);
    this.refuse(answer.message, answer.outcome === "refused" ? answer.currentSource : undefined);
    if (answer.outcome === "refused") this.show("refused");
  }

  private refuse(message: string, currentSource: string | undefined): void {
    const parts: HTMLElement[] = [h("div", { text: message })];
    if (currentSource !== undefined) {
      parts.push(h("details", {}, [h("summary", { text: "The cell now reads" }), h("pre", { className: "neta-pre", text: currentSource })]));
    }
    this.refusal.replaceChildren(...parts);
    setVisible(this.refusal, true);
  }

  private show(state: "applied" | "reverted" | "refused"): void {
    setData(this.element, "state", state);
    setText(this.state, state === "reverted" ? "reverted" : "");
    setVisible(this.state, state === "reverted");
    if (state === "reverted") {
      setVisible(this.revert, false);
      setVisible(this.refusal, false);
      this.controls?.dispose();
    }
  }
}

export class EditsView {
  readonly element = h("div", { className: "neta-edits" });
  private readonly rows = new Map<string, EditRow>();

  constructor(private readonly ctx: ViewContext) {
    setVisible(this.element, false);
  }

  render(edits: readonly NotebookEdit[]): void {
    for (const edit of edits) {
      if (this.rows.has(edit.editId)) continue;
      const row = new EditRow(this.ctx, edit, this.ctx.edits);
      this.rows.set(edit.editId, row);
      this.element.append(row.element);
    }
    setVisible(this.element, edits.length > 0);
  }
}
