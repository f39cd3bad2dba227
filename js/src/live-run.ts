/**
 * Following a run live in a view of its own: how a view reaches runs (its page's server, or its
 * widget's comm) and the live view of one run by its id. The run widget opens its sub-agents'
 * runs with it; the crew board opens its tasks' runs with it; the side panel every run it shows.
 */
import { serverNotebookEdits, type NotebookEdits } from "./notebook";
import { reduceAll } from "./reducer";
import type { RunAction } from "./actions";
import { hasEnded, initialState, type RunState } from "./state";
import { setImagePolicy } from "./sanitize";
import { attachmentUrl, createCommTransport, imagePolicy, readPageConfig, type CommModel, type PageConfig, type Transport } from "./transport";
import { createServerTransport } from "./transport-server";
import { RunView } from "./view/run-view";

/** How many runs' latest states the page keeps for their next view. */
const RECENT_RUNS = 16;

/**
 * The latest state of the runs viewed lately, by requestId. JupyterLab makes a new view of a widget
 * each time the kernel refreshes its output (at the end of every run); the new view starts from the
 * state the one before it reached, instead of following the whole run again from its first event.
 * A child run opened again starts from where its view had got to, too.
 */
const recentStates = new Map<string, RunState>();

export function remember(state: RunState): void {
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
export function startState(requestId: string): RunState {
  return (requestId && recentStates.get(requestId)) || initialState(requestId || null);
}

/** What a view's connections depend on: the widget's comm, its mode, its own run (if any). */
export interface RunSource {
  readonly model: CommModel;
  /** "server" when the runs live on the page's Jupyter server. */
  mode(): unknown;
  /** The widget's own run's id ("" for none yet, or a widget without one). */
  ownId(): string;
}

/** How the views of one widget reach runs: its page (server) or its comm, for any run of its tree. */
export class Connections {
  readonly config: PageConfig | null = readPageConfig();

  constructor(private readonly source: RunSource) {
    setImagePolicy(imagePolicy(this.config));
  }

  /** Follow the widget's own run, or, with `child`, another run of its tree; null until there is one. */
  transport(lastSeq: () => number, signal: AbortSignal, child?: string): Transport | null {
    const { model } = this.source;
    const ownId = (): string => this.source.ownId();
    if (this.source.mode() === "server" && this.config) {
      // A server run is followed by its id; without one yet, wait for the trait to be set.
      const requestId = child ?? ownId();
      return requestId ? createServerTransport({ config: this.config, requestId, lastSeq: lastSeq(), signal }) : null;
    }
    return createCommTransport({ model, requestId: ownId, lastSeq, child, signal });
  }

  resolveUrl = (path: string): string | null => attachmentUrl(path, this.config);

  /** The server's notebook edits, for a run on the server; none in embedded mode. */
  get notebook(): NotebookEdits | undefined {
    if (this.source.mode() !== "server" || !this.config) return undefined;
    this.edits ??= serverNotebookEdits(this.config);
    return this.edits;
  }

  private edits: NotebookEdits | undefined;
}

export function send(transport: Transport | null, action: RunAction): Promise<void> {
  return transport ? transport.send(action) : Promise.reject(new Error("Not connected to the run"));
}

/** What a view opened by its id may show and tell besides the run (the side panel's). */
export interface ShownRun {
  /** The run's prompt, in the view's header. */
  readonly prompt?: string;
  /** Called with each state the view shows. */
  readonly onState?: (state: RunState) => void;
}

/**
 * A live view of run `requestId` in `container` (a sub-agent row or a crew task opened, a run
 * the side panel shows): the run widget's view, following the run's own stream, until `signal`
 * aborts.
 */
export function showRun(connections: Connections, requestId: string, container: HTMLElement, signal: AbortSignal, shown: ShownRun = {}): void {
  let state = startState(requestId);
  let transport: Transport | null = null;
  const view = new RunView(container, {
    prompt: shown.prompt,
    onAction: (action) => send(transport, action),
    resolveUrl: connections.resolveUrl,
    notebook: connections.notebook,
    showRun: (id, el, s) => showRun(connections, id, el, s),
    signal,
    initial: state,
  });
  shown.onState?.(state);
  if (hasEnded(state)) return;
  transport = connections.transport(() => state.lastSeq, signal, requestId);
  transport?.start(
    (events) => {
      const next = reduceAll(events, state);
      if (next === state) return;
      state = next;
      remember(next);
      view.update(next);
      shown.onState?.(next);
    },
    (message) => view.setNotice(message),
  );
}

