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
import type { RunAction } from "./actions";
import type { TraitName, WidgetTraits } from "./comm";
import { childLifetime, onAbort } from "./lifetime";
import { serverNotebookEdits, type NotebookEdits } from "./notebook";
import { browserNotifications, labToast, liveEnd, tell, type NotifyEnv } from "./notify";
import { reduceAll } from "./reducer";
import { SnapshotWriter, stateFromSnapshot } from "./snapshot";
import { hasEnded, initialState, type RunState } from "./state";
import { setImagePolicy } from "./sanitize";
import { attachmentUrl, createCommTransport, imagePolicy, readPageConfig, type CommModel, type PageConfig, type Transport } from "./transport";
import { createServerTransport } from "./transport-server";
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

/** How many runs' latest states the page keeps for their next view. */
const RECENT_RUNS = 16;

/**
 * The latest state of the runs viewed lately, by requestId. JupyterLab makes a new view of a widget
 * each time the kernel refreshes its output (at the end of every run); the new view starts from the
 * state the one before it reached, instead of following the whole run again from its first event.
 * A child run opened again starts from where its view had got to, too.
 */
const recentStates = new Map<string, RunState>();

function remember(state: RunState): void {
  const id = state.requestId;
  if (!id) return;
  const known = recentStates.get(id);
  if (known && known.lastSeq > state.lastSeq) return;
  recentStates.delete(id);
  recentStates.set(id, state);
  const oldest = recentStates.keys().next();
  if (recentStates.size > RECENT_RUNS && !oldest.done) recentStates.delete(oldest.value);
}

/** Where a view of run `requestId` starts: the latest state this page saw of it, or nothing. */
function startState(requestId: string): RunState {
  return (requestId && recentStates.get(requestId)) || initialState(requestId || null);
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

/** How the views of one widget reach runs: its page (server) or its comm, for any run of its tree. */
class Connections {
  readonly config: PageConfig | null = readPageConfig();

  constructor(private readonly model: WidgetModel) {}

  /** Follow the widget's own run, or, with `child`, another run of its tree; null until there is one. */
  transport(lastSeq: () => number, signal: AbortSignal, child?: string): Transport | null {
    const ownId = (): string => stringTrait(this.model, "request_id");
    if (this.model.get("mode") === "server" && this.config) {
      // A server run is followed by its id; without one yet, wait for the trait to be set.
      const requestId = child ?? ownId();
      return requestId ? createServerTransport({ config: this.config, requestId, lastSeq: lastSeq(), signal }) : null;
    }
    return createCommTransport({ model: this.model, requestId: ownId, lastSeq, child, signal });
  }

  resolveUrl = (path: string): string | null => attachmentUrl(path, this.config);

  /** The server's notebook edits, for a run on the server; none in embedded mode. */
  get notebook(): NotebookEdits | undefined {
    if (this.model.get("mode") !== "server" || !this.config) return undefined;
    this.edits ??= serverNotebookEdits(this.config);
    return this.edits;
  }

  private edits: NotebookEdits | undefined;
}

/**
 * A live view of a child run inside the parent's view (a sub-agent row opened): the same view,
 * following the child's own stream, until `signal` aborts.
 */
function showChildRun(connections: Connections, requestId: string, container: HTMLElement, signal: AbortSignal): void {
  let state = startState(requestId);
  let transport: Transport | null = null;
  const view = new RunView(container, {
    onAction: (action) => send(transport, action),
    resolveUrl: connections.resolveUrl,
    notebook: connections.notebook,
    showRun: (id, el, s) => showChildRun(connections, id, el, s),
    signal,
  });
  view.update(state);
  if (hasEnded(state)) return;
  transport = connections.transport(() => state.lastSeq, signal, requestId);
  transport?.start(
    (events) => {
      const next = reduceAll(events, state);
      if (next === state) return;
      state = next;
      remember(next);
      view.update(next);
    },
    (message) => view.setNotice(message),
  );
}

function send(transport: Transport | null, action: RunAction): Promise<void> {
  return transport ? transport.send(action) : Promise.reject(new Error("Not connected to the run"));
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

  constructor(private readonly model: WidgetModel, el: HTMLElement, private readonly lifetime: AbortSignal) {
    this.connections = new Connections(model);
    setImagePolicy(imagePolicy(this.connections.config));
    this.state = startState(this.requestId());
    this.connection = childLifetime(lifetime);
    this.view = new RunView(el, {
      prompt: stringTrait(model, "prompt"),
      onAction: (action) => send(this.transport, action),
      resolveUrl: this.connections.resolveUrl,
      notebook: this.connections.notebook,
      showRun: (id, container, signal) => showChildRun(this.connections, id, container, signal),
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
    // Until live events arrive (or if they never can), show what the saved notebook knew.
    const saved = this.state.lastSeq < 0 ? stateFromSnapshot(model.get("snapshot")) : null;
    this.view.update(saved ?? this.state);
    listen(model, "change:request_id", () => this.restart(), lifetime);
    listen(model, "change:prompt", () => this.view.setPrompt(stringTrait(model, "prompt")), lifetime);
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

/** Show the run of `model` in `el`; returns the cleanup. */
export function mount(model: WidgetModel, el: HTMLElement): () => void {
  const lifetime = new AbortController();
  new RunWidget(model, el, lifetime.signal);
  return () => lifetime.abort();
}
