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
import { readPageConfig } from "../transport";
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
  let current: PanelSettings = readSettings(settings?.composite);
  const widget = new PanelWidget();
  widget.id = PANEL_ID;
  widget.title.label = badgeLabel(0);
  widget.title.caption = "neta: your runs, what waits for you, and a prompt";
  widget.addClass("neta-panel-widget");
  const lifetime = new AbortController();
  widget.disposed.connect(() => lifetime.abort());
  const saved: SavedPanel = { followed: null, open: false };
  const store = panelStore(stateDb, config.baseUrl);
  let restoring = true;
  const save = (change: Partial<SavedPanel>): void => {
    Object.assign(saved, change);
    if (!restoring) store.save({ ...saved });
  };
  const host: PanelHost = {
    config,
    activeNotebook: () => activeNotebook(tracker),
    asksChanged: (count, arrived) => {
      widget.title.label = badgeLabel(count);
      widget.title.dataset = { ...widget.title.dataset, "neta-asks": String(count) };
      const notice = askNotice(arrived);
      if (notice && current.notifyAsks && !widget.isVisible) {
        Notification.warning(notice, { autoClose: false, actions: [{ label: "Open neta", callback: () => app.shell.activateById(PANEL_ID) }] });
      }
    },
    followedChanged: (requestId) => save({ followed: requestId }),
  };
  const panel = new NetaPanel(host, lifetime.signal);
  panel.askBox.setBindDefault(current.bindToNotebook);
  widget.node.append(panel.element);
  widget.onShown = () => {
    save({ open: true });
    panel.askBox.refreshTarget();
    void panel.refresh();
  };
  widget.onHidden = () => save({ open: false });
  tracker?.currentChanged.connect(() => panel.askBox.refreshTarget());
  settings?.changed.connect(() => {
    current = readSettings(settings.composite);
    panel.setPollMs(current.pollSeconds * 1000);
  });
  app.shell.add(widget, current.area, { rank: 900 });
  restorer?.add(widget, PANEL_ID);
  addCommands(app, palette, panel);
  panel.start(current.pollSeconds * 1000);
  // Not awaited: the page is restored only once every plugin has activated, this one included.
  void app.restored
    .then(() => restore(app, store, panel))
    .finally(() => {
      restoring = false;
      save({ open: widget.isVisible, followed: panel.followedId });
    });
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
