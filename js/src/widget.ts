/**
 * The run widget: model → transport → reducer → renderer (index.ts loads it for anywidget).
 *
 * The traits it reads and the messages it exchanges with the kernel are typed in comm.ts. The
 * module writes `snapshot` back (throttled, and at once when the run comes to rest) so a saved
 * notebook keeps the answer.
 *
 * One lifetime per view: an AbortController whose signal everything the view starts is given
 * (transports, the renderer, model listeners, the views of child runs it opens); disposing the
 * view aborts it, and each of them ends itself.
 */
import type { TraitName, WidgetTraits } from "./comm";
import { childLifetime, onAbort } from "./lifetime";
import { Connections, remember, send, showRun, startState } from "./live-run";
import { browserNotifications, labToast, liveEnd, tell, type NotifyEnv } from "./notify";
import { QueuedLine } from "./queued";
import { reduceAll } from "./reducer";
import { SnapshotWriter, stateFromSnapshot } from "./snapshot";
import { hasEnded, type RunState } from "./state";
import type { CommModel, Transport } from "./transport";
import { showPageToast } from "./view/page-toast";
import { RunView } from "./view/run-view";

/** The part of anywidget's model this module uses. */
export interface WidgetModel extends CommModel {
  get(name: TraitName): unknown;
  set(name: TraitName, value: unknown): void;
  save_changes(): void;
  on(name: string, callback: (...args: unknown[]) => void): void;
  off(name: string, callback?: (...args: unknown[]) => void): void;
}

function text(value: unknown): string {
  return typeof value === "string" ? value : "";
}

/** A string trait, or "" when the model holds something else. */
function stringTrait(model: WidgetModel, name: "request_id" | "prompt"): WidgetTraits[typeof name] {
  return text(model.get(name));
}

/** How this page tells of a run that ended while it was hidden (notify.ts). */
function pageNotifyEnv(): NotifyEnv {
  return {
    hidden: () => document.visibilityState === "hidden",
    now: () => Date.now(),
    notifications: browserNotifications(),
    labToast,
    pageToast: (end, onClick) => void showPageToast(end, onClick),
  };
}

/** Listen to the model until `signal` aborts. */
function listen(model: WidgetModel, name: string, callback: () => void, signal: AbortSignal): void {
  model.on(name, callback);
  onAbort(signal, () => model.off(name, callback));
}

class RunWidget {
  private readonly connections: Connections;
  private readonly view: RunView;
  private readonly snapshots: SnapshotWriter;
  private state: RunState;
  private transport: Transport | null = null;
  private readonly notify = pageNotifyEnv();
  /** The current connection's lifetime: a new run id ends it and starts another. */
  private connection: AbortController;

  constructor(
    private readonly model: WidgetModel,
    el: HTMLElement,
    private readonly lifetime: AbortSignal,
    /** Called as events arrive: the page notes whether the view is on it (see `views`). */
    private readonly noteShown: () => void = () => {},
  ) {
    this.connections = new Connections({
      model,
      mode: () => model.get("mode"),
      ownId: () => stringTrait(model, "request_id"),
    });
    this.state = startState(this.requestId());
    this.connection = childLifetime(lifetime);
    // Until live events arrive (or if they never can), show what the saved notebook knew.
    const saved = this.state.lastSeq < 0 ? stateFromSnapshot(model.get("snapshot")) : null;
    this.view = new RunView(el, {
      prompt: stringTrait(model, "prompt"),
      initial: saved ?? this.state,
      onAction: (action) => send(this.transport, action),
      resolveUrl: this.connections.resolveUrl,
      notebook: this.connections.notebook,
      showRun: (id, container, signal) => showRun(this.connections, id, container, signal),
      signal: lifetime,
      notifications: this.notify.notifications,
    });
    this.snapshots = new SnapshotWriter(
      (snapshot) => {
        model.set("snapshot", snapshot);
        model.save_changes();
      },
      { setTimeout: (cb, ms) => setTimeout(cb, ms), clearTimeout: (h) => clearTimeout(h as ReturnType<typeof setTimeout>) },
    );
    onAbort(lifetime, () => this.snapshots.dispose());
    listen(model, "change:request_id", () => this.restart(), lifetime);
    listen(model, "change:prompt", () => this.view.setPrompt(stringTrait(model, "prompt")), lifetime);
    const queued = new QueuedLine(el.ownerDocument);
    this.view.root.append(queued.element);
    queued.show(text(model.get("waiting")));
    listen(model, "change:waiting", () => queued.show(text(model.get("waiting"))), lifetime);
    this.connect();
  }

  private requestId(): string {
    return stringTrait(this.model, "request_id");
  }

  private connect(): void {
    if (hasEnded(this.state)) return;
    this.transport = this.connections.transport(() => this.state.lastSeq, this.connection.signal);
    this.transport?.start(
      (events) => this.apply(events),
      (message) => this.view.setNotice(message),
    );
  }

  private restart(): void {
    this.connection.abort();
    this.connection = childLifetime(this.lifetime);
    this.transport = null;
    this.state = startState(this.requestId());
    this.view.setNotice(null);
    this.view.update(this.state);
    this.connect();
  }

  private apply(events: readonly unknown[]): void {
    this.noteShown();
    const prev = this.state;
    const next = reduceAll(events, prev);
    if (next === prev) return;
    this.state = next;
    remember(next);
    this.view.update(next);
    this.snapshots.push(next);
    const end = liveEnd(prev, next, events, this.notify.now(), stringTrait(this.model, "prompt"));
    tell(this.notify, end, () => this.view.root.scrollIntoView({ block: "nearest" }));
  }
}

/** A view on this page: its element, whether that was ever on the page, and its end. */
interface ShownView {
  readonly el: HTMLElement;
  readonly requestId: () => string;
  shown: boolean;
  readonly dispose: () => void;
}

/**
 * The views on this page. JupyterLab shows an output the kernel updated (at every rest of a run)
 * with a new view of the widget in place of the old one, which it takes out of the page without
 * disposing it: left alone, the old view would follow the run, over a connection of its own,
 * until the run ends. Such a view was on the page and has been taken out of its parent; a view
 * scrolled out of a windowed notebook keeps its parent, and one not yet put on the page was
 * never shown. The next view of the same run disposes the views taken out.
 */
const views = new Set<ShownView>();

function disposeReplaced(requestId: string): void {
  for (const view of views) {
    view.shown ||= view.el.isConnected;
    if (view.shown && view.el.parentNode === null && view.requestId() === requestId) view.dispose();
  }
}

/** Show the run of `model` in `el`; returns the cleanup. */
export function mount(model: WidgetModel, el: HTMLElement): () => void {
  disposeReplaced(stringTrait(model, "request_id"));
  const lifetime = new AbortController();
  const view: ShownView = {
    el,
    requestId: () => stringTrait(model, "request_id"),
    shown: el.isConnected,
    dispose: () => lifetime.abort(),
  };
  views.add(view);
  onAbort(lifetime.signal, () => views.delete(view));
  new RunWidget(model, el, lifetime.signal, () => (view.shown ||= el.isConnected));
  return () => lifetime.abort();
}
