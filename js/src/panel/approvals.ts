/**
 * Every run waiting for the user (a permission ask or a question), each in the run widget's own
 * view: the same guarded prompt, with the same arm delay and visible-click rules, the call's code
 * or diff shown. A decision goes through the run API like the widget's, so the cell's widget
 * shows it too, and a decision made there takes the run off this list at the next refresh.
 */
import { childLifetime } from "../lifetime";
import { showRun, type Connections } from "../live-run";
import { h, setText } from "../view/dom";
import { originLabel, type RunRow } from "./runs";

interface Shown {
  readonly element: HTMLElement;
  readonly lifetime: AbortController;
}

export class ApprovalsView {
  readonly element: HTMLElement;
  private readonly heading: HTMLElement;
  private readonly list: HTMLElement;
  private readonly shown = new Map<string, Shown>();
  private waiting: readonly RunRow[] = [];
  /** The panel is on screen: only then are the runs' views made (each follows its run). */
  private visible = false;

  constructor(
    private readonly connections: Connections,
    private readonly lifetime: AbortSignal,
  ) {
    this.heading = h("h3", { className: "neta-panel-heading", testid: "neta-panel-asks-heading" });
    this.list = h("div", { className: "neta-panel-asks-list" });
    this.element = h("section", { className: "neta-panel-asks", testid: "neta-panel-asks" }, [this.heading, this.list]);
    this.element.hidden = true;
  }

  /** Show the runs in `waiting` (and only those), once the panel is on screen. */
  update(waiting: readonly RunRow[]): void {
    this.waiting = waiting;
    this.render();
  }

  setVisible(visible: boolean): void {
    this.visible = visible;
    this.render();
  }

  private render(): void {
    const waiting = this.visible ? this.waiting : [];
    const ids = new Set(waiting.map((run) => run.requestId));
    for (const [id, shown] of this.shown) {
      if (ids.has(id)) continue;
      shown.lifetime.abort();
      shown.element.remove();
      this.shown.delete(id);
    }
    for (const run of waiting) if (!this.shown.has(run.requestId)) this.add(run);
    this.element.hidden = this.shown.size === 0;
    setText(this.heading, `Waiting for you (${this.shown.size})`);
  }

  private add(run: RunRow): void {
    const lifetime = childLifetime(this.lifetime);
    const label = h("div", { className: "neta-panel-ask-origin", text: originLabel(run.origin) });
    const element = h("div", { className: "neta-panel-ask", testid: "neta-panel-ask" }, [label]);
    element.dataset["requestId"] = run.requestId;
    this.list.append(element);
    showRun(this.connections, run.requestId, element, lifetime.signal, { prompt: run.prompt });
    this.shown.set(run.requestId, { element, lifetime });
  }
}
