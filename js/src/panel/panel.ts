/**
 * The neta side panel, without JupyterLab: a prompt that starts runs, the runs waiting for the
 * user, the run followed, and the list of the user's runs. It is one more client of the run API:
 * the list is read from `GET agent/runs`, and a run is followed in the cell widget's own view
 * (live-run.ts `showRun`), over the same transports. lab/index.ts puts it in JupyterLab.
 */
import { childLifetime } from "../lifetime";
import { Connections, showRun } from "../live-run";
import type { RunState } from "../state";
import type { PageConfig } from "../transport";
import { button, h, setText } from "../view/dom";
import { AskBox, type Ask, type NotebookTarget } from "./ask-box";
import { ApprovalsView } from "./approvals";
import { PanelClient } from "./client";
import { InsertActions } from "./insert";
import { RunListView } from "./list-view";
import { waiting, type RunRow } from "./runs";

export interface PanelHost {
  readonly config: PageConfig;
  activeNotebook(): NotebookTarget | null;
  /** The runs waiting for the user changed: how many, and those that began to wait. */
  asksChanged(count: number, arrived: readonly RunRow[]): void;
  /** The run followed changed (the page keeps it for its next load). */
  followedChanged(requestId: string | null): void;
}

/** Nothing to send or receive: the panel follows runs on the server, never over a comm. */
const NO_COMM = { send: () => {}, on: () => {}, off: () => {} };

export class NetaPanel {
  readonly element: HTMLElement;
  readonly askBox: AskBox;
  private readonly client: PanelClient;
  private readonly connections: Connections;
  private readonly approvals: ApprovalsView;
  private readonly list: RunListView;
  private readonly followed: HTMLElement;
  private readonly followedTitle: HTMLElement;
  private readonly followedView: HTMLElement;
  private readonly notice: HTMLElement;
  private readonly inserts: InsertActions;
  private following: { id: string; lifetime: AbortController } | null = null;
  private sessionId: string | null = null;
  private runs: readonly RunRow[] = [];
  private asked = new Set<string>();
  private timer: ReturnType<typeof setTimeout> | null = null;
  private pollMs = 2000;

  constructor(
    private readonly host: PanelHost,
    private readonly lifetime: AbortSignal,
  ) {
    this.client = new PanelClient(host.config);
    this.connections = new Connections({ model: NO_COMM, mode: () => "server", ownId: () => "" });
    this.askBox = new AskBox((ask) => this.ask(ask), () => host.activeNotebook(), () => this.newConversation());
    this.approvals = new ApprovalsView(this.connections, lifetime);
    this.list = new RunListView((run) => this.follow(run.requestId, run.prompt));
    this.followedTitle = h("h3", { className: "neta-panel-heading", text: "Following" });
    const close = button("Close", "neta-panel-unfollow", "neta-button");
    close.addEventListener("click", () => this.follow(null));
    this.followedView = h("div", { className: "neta-panel-followed-view", testid: "neta-panel-followed-view" });
    this.inserts = new InsertActions(host.config, () => host.activeNotebook()?.path ?? null);
    const head = h("div", { className: "neta-panel-followed-head" }, [this.followedTitle, close]);
    this.followed = h("section", { className: "neta-panel-followed", testid: "neta-panel-followed" }, [head, this.followedView, this.inserts.element]);
    this.followed.hidden = true;
    this.notice = h("p", { className: "neta-panel-notice", testid: "neta-panel-notice" });
    this.notice.hidden = true;
    const runsHeading = h("h3", { className: "neta-panel-heading", text: "Runs" });
    this.element = h("div", { className: "neta-panel", testid: "neta-panel" }, [this.askBox.element, this.notice, this.approvals.element, this.followed, runsHeading, this.list.element]);
    lifetime.addEventListener("abort", () => this.stop(), { once: true });
  }

  /** Read the models and the runs now, then the runs every `pollMs`. */
  start(pollMs: number): void {
    this.pollMs = pollMs;
    this.client.models().then((models) => this.askBox.setModels(models), () => {});
    void this.poll();
  }

  /** The panel is on screen, or not: the waiting runs' views are made only while it is. */
  setVisible(visible: boolean): void {
    this.approvals.setVisible(visible);
  }

  setPollMs(pollMs: number): void {
    this.pollMs = pollMs;
  }

  get followedId(): string | null {
    return this.following?.id ?? null;
  }

  /** Follow run `requestId` live in the panel (null: none). */
  follow(requestId: string | null, prompt?: string): void {
    if (this.following?.id === requestId) return;
    this.following?.lifetime.abort();
    this.followedView.replaceChildren();
    this.following = null;
    this.inserts.show(null);
    this.followed.hidden = requestId === null;
    this.list.setFollowed(requestId);
    this.host.followedChanged(requestId);
    if (requestId === null) return;
    const lifetime = childLifetime(this.lifetime);
    this.following = { id: requestId, lifetime };
    this.followed.dataset["requestId"] = requestId;
    const row = this.runs.find((run) => run.requestId === requestId);
    this.continueFrom(row);
    const onState = (state: RunState): void => {
      if (!lifetime.signal.aborted) this.inserts.show(state);
    };
    showRun(this.connections, requestId, this.followedView, lifetime.signal, { prompt: prompt ?? row?.prompt, onState });
  }

  /** Asking while a run of the panel is followed continues its conversation. */
  private continueFrom(row: RunRow | undefined): void {
    if (row?.origin.kind === "panel") this.sessionId = row.sessionId || null;
  }

  /** Read the runs now (after an action, or when the panel is shown again). */
  async refresh(): Promise<void> {
    try {
      this.runs = await this.client.runs();
      this.setNotice(null);
    } catch (error) {
      this.setNotice(error instanceof Error ? error.message : String(error));
      return;
    }
    this.list.update(this.runs);
    if (this.sessionId === null) this.continueFrom(this.runs.find((run) => run.requestId === this.following?.id));
    const pending = waiting(this.runs);
    this.approvals.update(pending);
    const arrived = pending.filter((run) => !this.asked.has(askKey(run)));
    this.asked = new Set(pending.map(askKey));
    this.host.asksChanged(pending.length, arrived);
  }

  private async poll(): Promise<void> {
    this.timer = null;
    await this.refresh();
    if (!this.lifetime.aborted) this.timer = setTimeout(() => void this.poll(), this.pollMs);
  }

  private stop(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  private async ask(ask: Ask): Promise<void> {
    const started = await this.client.start({
      content: ask.content,
      model: ask.model,
      sessionId: this.sessionId,
      notebookPath: ask.notebook?.path ?? null,
      kernelId: ask.notebook?.kernelId ?? null,
      origin: "panel",
    });
    this.sessionId = started.sessionId || null;
    this.follow(started.requestId, ask.content);
    void this.refresh();
  }

  private newConversation(): void {
    this.sessionId = null;
    this.follow(null);
    this.askBox.focus();
  }

  private setNotice(message: string | null): void {
    this.notice.hidden = message === null;
    setText(this.notice, message ?? "");
  }
}

function askKey(run: RunRow): string {
  return `${run.requestId}:${run.pendingAsk?.askId ?? ""}`;
}
