/**
 * The run widget: model → transport → reducer → renderer (index.ts loads it for anywidget).
 *
 * Traits read (the Python widget defines them): `request_id`, `mode` ("server" | "embedded"),
 * `prompt`, `snapshot`. The module writes `snapshot` back (throttled, and at once when the run
 * comes to rest) so a saved notebook keeps the answer.
 */
import { reduceAll } from "./reducer";
import { SnapshotWriter, stateFromSnapshot } from "./snapshot";
import { hasEnded, initialState, type RunState } from "./state";
import { setImagePolicy } from "./sanitize";
import { attachmentUrl, createCommTransport, imagePolicy, readPageConfig, type CommModel, type PageConfig, type Transport } from "./transport";
import { createServerTransport } from "./transport-server";
import { RunView } from "./view/run-view";

/** The part of anywidget's model this module uses. */
export interface WidgetModel extends CommModel {
  get(name: string): unknown;
  set(name: string, value: unknown): void;
  save_changes(): void;
  on(name: string, callback: (...args: unknown[]) => void): void;
  off(name: string, callback?: (...args: unknown[]) => void): void;
}

function text(value: unknown): string {
  return typeof value === "string" ? value : "";
}

/** How many runs' latest states the page keeps for their next view. */
const RECENT_RUNS = 16;

/**
 * The latest state of the runs viewed lately, by requestId. JupyterLab makes a new view of a widget
 * each time the kernel refreshes its output (at the end of every run); the new view starts from the
 * state the one before it reached, instead of following the whole run again from its first event.
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

class RunWidget {
  private readonly config: PageConfig | null = readPageConfig();
  private readonly view: RunView;
  private readonly snapshots: SnapshotWriter;
  private state: RunState;
  private transport: Transport | null = null;
  private readonly onRequestId = () => this.restart();
  private readonly onPrompt = () => this.view.setPrompt(text(this.model.get("prompt")));

  constructor(private readonly model: WidgetModel, el: HTMLElement) {
    setImagePolicy(imagePolicy(this.config));
    this.state = startState(this.requestId());
    this.view = new RunView(el, {
      prompt: text(model.get("prompt")),
      onAction: (action) => (this.transport ? this.transport.send(action) : Promise.reject(new Error("Not connected to the run"))),
      resolveUrl: (path) => attachmentUrl(path, this.config),
    });
    this.snapshots = new SnapshotWriter(
      (snapshot) => {
        model.set("snapshot", snapshot);
        model.save_changes();
      },
      { setTimeout: (cb, ms) => setTimeout(cb, ms), clearTimeout: (h) => clearTimeout(h as ReturnType<typeof setTimeout>) },
    );
    // Until live events arrive (or if they never can), show what the saved notebook knew.
    const saved = this.state.lastSeq < 0 ? stateFromSnapshot(model.get("snapshot")) : null;
    this.view.update(saved ?? this.state);
    model.on("change:request_id", this.onRequestId);
    model.on("change:prompt", this.onPrompt);
    this.connect();
  }

  dispose(): void {
    this.model.off("change:request_id", this.onRequestId);
    this.model.off("change:prompt", this.onPrompt);
    this.transport?.close();
    this.transport = null;
    this.snapshots.dispose();
    this.view.dispose();
  }

  private requestId(): string {
    return text(this.model.get("request_id"));
  }

  private connect(): void {
    const requestId = this.requestId();
    const server = this.model.get("mode") === "server" && this.config !== null;
    // A server run is followed by its id; without one yet, wait for the trait to be set.
    if ((server && !requestId) || hasEnded(this.state)) return;
    this.transport = server && this.config
      ? createServerTransport({ config: this.config, requestId, lastSeq: this.state.lastSeq })
      : createCommTransport({ model: this.model, requestId: () => this.state.requestId ?? this.requestId(), lastSeq: () => this.state.lastSeq });
    this.transport.start(
      (events) => this.apply(events),
      (message) => this.view.setNotice(message),
    );
  }

  private restart(): void {
    this.transport?.close();
    this.transport = null;
    this.state = startState(this.requestId());
    this.view.setNotice(null);
    this.view.update(this.state);
    this.connect();
  }

  private apply(events: readonly unknown[]): void {
    const next = reduceAll(events, this.state);
    if (next === this.state) return;
    this.state = next;
    remember(next);
    this.view.update(next);
    this.snapshots.push(next);
  }
}

/** Show the run of `model` in `el`; returns the cleanup. */
export function mount(model: WidgetModel, el: HTMLElement): () => void {
  const widget = new RunWidget(model, el);
  return () => widget.dispose();
}
