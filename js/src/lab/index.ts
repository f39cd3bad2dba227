/**
 * The neta side panel in JupyterLab 4 and Notebook 7 (a prebuilt extension: build.mjs bundles this
 * module, `jupyter labextension build` makes it the extension in the wheel). What the panel does
 * is panel/panel.ts; this module gives it its place: a side area, the palette's commands and a
 * shortcut, its settings, the count of waiting runs on its tab, a notification when a run asks
 * while the panel is closed, and the run it followed after a reload.
 */
import "../styles.css";
import "../styles-workspace.css";
import "../panel/panel.css";
import { ILayoutRestorer, type JupyterFrontEnd, type JupyterFrontEndPlugin } from "@jupyterlab/application";
import { ICommandPalette, Notification } from "@jupyterlab/apputils";
import { INotebookTracker } from "@jupyterlab/notebook";
import { ISettingRegistry } from "@jupyterlab/settingregistry";
import { IStateDB } from "@jupyterlab/statedb";
import { Widget } from "@lumino/widgets";
import { readPageConfig, type PageConfig } from "../transport";
import type { RunRow } from "../panel/runs";
import type { NotebookTarget } from "../panel/ask-box";
import { NetaPanel, type PanelHost } from "../panel/panel";
import { askNotice, badgeLabel, readSettings, type PanelSettings } from "./settings";

const PLUGIN_ID = "neta-jupyter:panel";
const PANEL_ID = "neta-panel";
const STATE_KEY = `${PLUGIN_ID}:state`;
export const COMMANDS = { open: "neta:open-panel", focus: "neta:focus-prompt" } as const;

class PanelWidget extends Widget {
  onShown: () => void = () => {};
  onHidden: () => void = () => {};

  protected override onAfterShow(): void {
    this.onShown();
  }

  protected override onAfterHide(): void {
    this.onHidden();
  }
}

/** What the page keeps of the panel for its next load (JupyterLab's layout keeps the rest). */
interface SavedPanel {
  followed: string | null;
  open: boolean;
}

function activeNotebook(tracker: INotebookTracker | null): NotebookTarget | null {
  const current = tracker?.currentWidget;
  if (!current) return null;
  return { path: current.context.path, kernelId: current.sessionContext.session?.kernel?.id ?? null };
}

/** The panel in its side area, with what the page keeps of it and its badge and notices. */
class LabPanel {
  readonly widget = new PanelWidget();
  readonly panel: NetaPanel;
  private readonly saved: SavedPanel = { followed: null, open: false };
  private restoring = true;

  constructor(
    private readonly app: JupyterFrontEnd,
    config: PageConfig,
    tracker: INotebookTracker | null,
    private readonly store: PanelStore,
    private settings: PanelSettings,
  ) {
    const widget = this.widget;
    widget.id = PANEL_ID;
    widget.title.label = badgeLabel(0);
    widget.title.caption = "neta: your runs, what waits for you, and a prompt";
    widget.addClass("neta-panel-widget");
    const lifetime = new AbortController();
    widget.disposed.connect(() => lifetime.abort());
    const host: PanelHost = {
      config,
      activeNotebook: () => activeNotebook(tracker),
      asksChanged: (count, arrived) => this.asksChanged(count, arrived),
      followedChanged: (requestId) => this.save({ followed: requestId }),
    };
    this.panel = new NetaPanel(host, lifetime.signal);
    this.panel.askBox.setBindDefault(settings.bindToNotebook);
    widget.node.append(this.panel.element);
    widget.onShown = () => {
      this.save({ open: true });
      this.panel.setVisible(true);
      this.panel.askBox.refreshTarget();
      void this.panel.refresh();
    };
    widget.onHidden = () => {
      this.save({ open: false });
      this.panel.setVisible(false);
    };
    tracker?.currentChanged.connect(() => this.panel.askBox.refreshTarget());
  }

  setSettings(settings: PanelSettings): void {
    this.settings = settings;
    this.panel.setPollMs(settings.pollSeconds * 1000);
  }

  /** Start polling; once the page is restored, reopen and follow what the last load had. */
  start(): void {
    this.panel.start(this.settings.pollSeconds * 1000);
    // Not awaited: the page is restored only once every plugin has activated, this one included.
    void this.app.restored
      .then(() => restore(this.app, this.store, this.panel))
      .finally(() => {
        this.restoring = false;
        this.save({ open: this.widget.isVisible, followed: this.panel.followedId });
      });
  }

  private save(change: Partial<SavedPanel>): void {
    Object.assign(this.saved, change);
    if (!this.restoring) this.store.save({ ...this.saved });
  }

  private asksChanged(count: number, arrived: readonly RunRow[]): void {
    const title = this.widget.title;
    title.label = badgeLabel(count);
    title.dataset = { ...title.dataset, "neta-asks": String(count) };
    // A run whose prompt the page shows already (in its cell's widget) needs no notice.
    const notice = askNotice(arrived.filter((run) => !shownElsewhere(run.requestId, this.widget.node)));
    if (notice && this.settings.notifyAsks && !this.widget.isVisible) {
      const open = { label: "Open neta", callback: () => this.app.shell.activateById(PANEL_ID) };
      Notification.warning(notice, { autoClose: false, actions: [open] });
    }
  }
}

/** Whether a view of run `requestId` is on the page outside `panel` (a cell's widget, say). */
function shownElsewhere(requestId: string, panel: HTMLElement): boolean {
  const views = document.querySelectorAll(`[data-request-id="${CSS.escape(requestId)}"]`);
  return [...views].some((view) => !panel.contains(view));
}

async function activate(
  app: JupyterFrontEnd,
  tracker: INotebookTracker | null,
  restorer: ILayoutRestorer | null,
  palette: ICommandPalette | null,
  registry: ISettingRegistry | null,
  stateDb: IStateDB | null,
): Promise<void> {
  const config = readPageConfig();
  if (!config) return;
  const settings = registry ? await registry.load(PLUGIN_ID).catch(() => null) : null;
  const initial = readSettings(settings?.composite);
  const lab = new LabPanel(app, config, tracker, panelStore(stateDb, config.baseUrl), initial);
  settings?.changed.connect(() => lab.setSettings(readSettings(settings.composite)));
  app.shell.add(lab.widget, initial.area, { rank: 900 });
  restorer?.add(lab.widget, PANEL_ID);
  addCommands(app, palette, lab.panel);
  lab.start();
}

/**
 * Open the panel again if it was open, and follow the run it followed, before the page was
 * reloaded. JupyterLab's layout restorer reopens it too; Notebook 7 has none for side panels.
 */
async function restore(app: JupyterFrontEnd, store: PanelStore, panel: NetaPanel): Promise<void> {
  const fields = await store.fetch();
  if (fields["open"] === true) app.shell.activateById(PANEL_ID);
  if (typeof fields["followed"] === "string" && panel.followedId === null) panel.follow(fields["followed"]);
}

interface PanelStore {
  save(state: SavedPanel): void;
  fetch(): Promise<Record<string, unknown>>;
}

/**
 * Where the panel's state is kept: JupyterLab's state database, which its workspace keeps across
 * reloads, and the page's local storage, which Notebook 7 (whose state database is not kept)
 * reads back.
 */
function panelStore(stateDb: IStateDB | null, baseUrl: string): PanelStore {
  const key = `${STATE_KEY}:${baseUrl}`;
  const local = (): Record<string, unknown> => {
    try {
      const value: unknown = JSON.parse(window.localStorage.getItem(key) ?? "{}");
      return value && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
    } catch {
      return {};
    }
  };
  return {
    save(state) {
      void stateDb?.save(STATE_KEY, { ...state }).catch(() => {});
      try {
        window.localStorage.setItem(key, JSON.stringify(state));
      } catch {
        // storage full or refused: the workspace's copy is enough in JupyterLab
      }
    },
    async fetch() {
      const kept = await stateDb?.fetch(STATE_KEY).catch(() => undefined);
      return kept && typeof kept === "object" && !Array.isArray(kept) ? { ...local(), ...(kept as Record<string, unknown>) } : local();
    },
  };
}

function addCommands(app: JupyterFrontEnd, palette: ICommandPalette | null, panel: NetaPanel): void {
  app.commands.addCommand(COMMANDS.open, {
    label: "Open the neta panel",
    execute: () => app.shell.activateById(PANEL_ID),
  });
  app.commands.addCommand(COMMANDS.focus, {
    label: "Ask neta (the panel's prompt)",
    execute: () => {
      app.shell.activateById(PANEL_ID);
      panel.askBox.focus();
    },
  });
  for (const command of Object.values(COMMANDS)) palette?.addItem({ command, category: "neta" });
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: "The neta side panel: every run, follow any, ask from the active notebook, answer what waits for you.",
  autoStart: true,
  optional: [INotebookTracker, ILayoutRestorer, ICommandPalette, ISettingRegistry, IStateDB],
  activate,
};

export default plugin;
