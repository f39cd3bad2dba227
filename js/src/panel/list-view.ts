/**
 * The run list: one row per run (status, prompt, where it came from, when, tokens), a status
 * filter and a search box. Every string from the server is set as text.
 */
import { h, isolateKeys, setData, setText } from "../view/dom";
import { STATUS_LABELS, ago, listed, originLabel, tokenLabel, type RunFilter, type RunRow, type StatusFilter } from "./runs";

const FILTERS: readonly [StatusFilter, string][] = [
  ["all", "All runs"],
  ["active", "Running or waiting"],
  ["waiting", "Waiting for me"],
  ["ended", "Ended"],
];

/** A prompt longer than this is cut in the row (the followed view shows it whole). */
const PROMPT_CHARS = 160;

interface Row {
  readonly element: HTMLElement;
  readonly status: HTMLElement;
  readonly prompt: HTMLElement;
  readonly meta: HTMLElement;
}

export class RunListView {
  readonly element: HTMLElement;
  private readonly body: HTMLElement;
  private readonly empty: HTMLElement;
  private readonly search: HTMLInputElement;
  private readonly status: HTMLSelectElement;
  private readonly rows = new Map<string, Row>();
  private runs: readonly RunRow[] = [];
  private followed: string | null = null;

  constructor(
    private readonly onSelect: (run: RunRow) => void,
    private readonly now: () => number = () => Date.now() / 1000,
  ) {
    this.search = h("input", { className: "neta-panel-search", testid: "neta-panel-search", attrs: { type: "search", placeholder: "Search runs", "aria-label": "Search runs" } });
    isolateKeys(this.search);
    this.status = h("select", { className: "neta-panel-filter", testid: "neta-panel-filter", attrs: { "aria-label": "Show" } }, FILTERS.map(([value, label]) => h("option", { text: label, attrs: { value } })));
    this.search.addEventListener("input", () => this.render());
    this.status.addEventListener("change", () => this.render());
    this.body = h("ul", { className: "neta-panel-runs", testid: "neta-panel-runs" });
    this.empty = h("p", { className: "neta-panel-empty", text: "No runs yet." });
    this.element = h("section", { className: "neta-panel-list" }, [h("div", { className: "neta-panel-filters" }, [this.status, this.search]), this.empty, this.body]);
  }

  get filter(): RunFilter {
    const value = this.status.value;
    const status = FILTERS.find(([name]) => name === value)?.[0] ?? "all";
    return { status, text: this.search.value };
  }

  update(runs: readonly RunRow[]): void {
    this.runs = runs;
    this.render();
  }

  setFollowed(requestId: string | null): void {
    this.followed = requestId;
    for (const [id, row] of this.rows) row.element.classList.toggle("neta-panel-run-followed", id === requestId);
  }

  private render(): void {
    const shown = listed(this.runs, this.filter);
    const keep = new Set(shown.map((run) => run.requestId));
    for (const [id, row] of this.rows) {
      if (!keep.has(id)) {
        row.element.remove();
        this.rows.delete(id);
      }
    }
    shown.forEach((run, index) => {
      const row = this.rows.get(run.requestId) ?? this.addRow(run);
      this.fill(row, run);
      if (this.body.children[index] !== row.element) this.body.insertBefore(row.element, this.body.children[index] ?? null);
    });
    this.empty.hidden = shown.length > 0;
    setText(this.empty, this.runs.length > 0 ? "No run matches." : "No runs yet.");
  }

  private addRow(run: RunRow): Row {
    const status = h("span", { className: "neta-panel-status", testid: "neta-panel-run-status" });
    const prompt = h("span", { className: "neta-panel-prompt", testid: "neta-panel-run-prompt" });
    const meta = h("span", { className: "neta-panel-meta", testid: "neta-panel-run-meta" });
    const element = h("li", { className: "neta-panel-run", testid: "neta-panel-run", attrs: { tabindex: "0", role: "button" } }, [h("div", { className: "neta-panel-run-top" }, [status, prompt]), meta]);
    setData(element, "requestId", run.requestId);
    const select = (): void => {
      const current = this.runs.find((r) => r.requestId === run.requestId) ?? run;
      this.onSelect(current);
    };
    element.addEventListener("click", select);
    element.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") {
        event.preventDefault();
        select();
      }
    });
    const row = { element, status, prompt, meta };
    this.rows.set(run.requestId, row);
    row.element.classList.toggle("neta-panel-run-followed", run.requestId === this.followed);
    return row;
  }

  private fill(row: Row, run: RunRow): void {
    setData(row.element, "status", run.status);
    setData(row.element, "origin", run.origin.kind);
    setText(row.status, STATUS_LABELS[run.status]);
    setData(row.status, "status", run.status);
    const prompt = run.prompt.length > PROMPT_CHARS ? `${run.prompt.slice(0, PROMPT_CHARS)}…` : run.prompt;
    setText(row.prompt, prompt);
    row.prompt.title = run.prompt.slice(0, 2000);
    const parts = [originLabel(run.origin), run.model, ago(run.created, this.now()), tokenLabel(run.tokens)];
    setText(row.meta, parts.filter(Boolean).join(" · "));
  }
}
