/**
 * Putting a followed run's answer into a notebook: as a markdown cell, or its code blocks as a
 * code cell, through the server (`POST neta/api/notebook/insert`), which writes the cell as the
 * notebook tools do, with the run as its provenance, and keeps it as one of the run's edits.
 */
import { finalText, hasEnded, type RunState } from "../state";
import { postJson, type Fetch, type PageConfig } from "../transport";
import { button, h, setText } from "../view/dom";

const FENCE = /^(```+|~~~+)[^\n]*\n([\s\S]*?)^\1[ \t]*$/gm;

/** The code blocks of a markdown answer, one after the other ("" when it has none). */
export function codeOf(markdown: string): string {
  return [...markdown.matchAll(FENCE)]
    .map((match) => (match[2] ?? "").replace(/\n$/, ""))
    .filter((code) => code.trim() !== "")
    .join("\n\n");
}

export class InsertActions {
  readonly element: HTMLElement;
  private readonly markdown: HTMLButtonElement;
  private readonly code: HTMLButtonElement;
  private readonly said: HTMLElement;
  private state: RunState | null = null;

  constructor(
    private readonly config: PageConfig,
    /** The notebook a cell goes into now (the active one), or null. */
    private readonly notebook: () => string | null,
    private readonly fetchImpl: Fetch = (url, init) => fetch(url, init),
  ) {
    this.markdown = button("Insert answer as markdown cell", "neta-panel-insert-markdown");
    this.code = button("Insert code as code cell", "neta-panel-insert-code");
    this.markdown.addEventListener("click", () => void this.insert("markdown"));
    this.code.addEventListener("click", () => void this.insert("code"));
    this.said = h("span", { className: "neta-panel-insert-said", testid: "neta-panel-insert-said" });
    this.element = h("div", { className: "neta-panel-insert" }, [this.markdown, this.code, this.said]);
    this.show(null);
  }

  /** The followed run's state now (null: none followed). */
  show(state: RunState | null): void {
    this.state = state;
    const answer = state && hasEnded(state) ? finalText(state) : "";
    this.element.hidden = answer === "";
    this.code.hidden = codeOf(answer) === "";
    if (state === null) setText(this.said, "");
  }

  private async insert(cellType: "markdown" | "code"): Promise<void> {
    const state = this.state;
    const path = this.notebook();
    if (!state?.requestId) return;
    if (!path) {
      setText(this.said, "Open a notebook to insert into.");
      return;
    }
    const answer = finalText(state);
    const source = cellType === "code" ? codeOf(answer) : answer;
    try {
      await postJson(this.fetchImpl, this.config, "notebook/insert", { requestId: state.requestId, notebookPath: path, cellType, source });
      setText(this.said, `Inserted at the end of ${path}.`);
    } catch (error) {
      setText(this.said, error instanceof Error ? error.message : String(error));
    }
  }
}
