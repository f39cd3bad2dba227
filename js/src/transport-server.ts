/**
 * Following a run on the Jupyter server: WebSocket `{baseUrl}neta/ws` first, SSE when the socket
 * cannot connect. Both resume from the last seq seen, so a drop loses and repeats nothing (the
 * reducer drops repeats anyway).
 *
 * Phases, from the events that pass through:
 *   live      → follow; reconnect with backoff on a drop
 *   waiting   → MESSAGE_SUSPENDED, or MESSAGE_FAILED recoverable: the run may go on under the same
 *               requestId. The WebSocket stays subscribed; SSE (which the server closes) reconnects
 *               after an action of ours and polls slowly meanwhile.
 *   ended     → MESSAGE_COMPLETED or unrecoverable MESSAGE_FAILED: unsubscribe and close.
 *   refused   → the server says the run is unknown or not ours: stop and say so.
 *
 * A run whose events cannot be read (imported from history: its stream answers IMPORTED_RUN; or
 * finished long enough ago that its events were deleted: EVENTS_EXPIRED) is rebuilt once from its
 * session's tree (history.ts) and then ended.
 */
import type { RunAction } from "./actions";
import { arrivalProbe, closedWith, postAction, type ArrivalProbe, type EventsHandler, type Fetch, type NoticeHandler, type PageConfig, type Transport } from "./transport";
import { queryPath } from "./api";
import { historyEvents } from "./history";
import { EVENT_TYPES, isRecord, seqOf, str } from "./wire";

export interface ServerEnv {
  readonly WebSocket: new (url: string) => WebSocket;
  readonly EventSource: new (url: string, init?: EventSourceInit) => EventSource;
  readonly fetch: Fetch;
  readonly location: { readonly protocol: string; readonly host: string };
  readonly cookies: () => string;
  readonly setTimeout: (callback: () => void, ms: number) => unknown;
  readonly clearTimeout: (handle: unknown) => void;
}

export function browserEnv(): ServerEnv {
  return {
    WebSocket,
    EventSource,
    fetch: (url, init) => fetch(url, init),
    location: window.location,
    cookies: () => document.cookie,
    setTimeout: (callback, ms) => setTimeout(callback, ms),
    clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
  };
}

export interface ServerOptions {
  readonly config: PageConfig;
  readonly requestId: string;
  /** Seq already applied by the view (-1 for none). */
  readonly lastSeq?: number;
  readonly env?: ServerEnv;
  /** Closes the transport when it aborts. */
  readonly signal?: AbortSignal;
}

type Phase = "live" | "waiting" | "ended" | "refused";

const PING_MS = 30_000;
const SSE_POLL_MS = 15_000;
/** Failed WebSocket reconnects before trying SSE instead. */
const WS_ATTEMPTS = 4;

export function backoffMs(attempt: number): number {
  return Math.min(10_000, 500 * 2 ** Math.max(0, attempt));
}

export function wsUrl(config: PageConfig, location: ServerEnv["location"]): string {
  const base = config.wsUrl ?? `${location.protocol === "https:" ? "wss:" : "ws:"}//${location.host}${config.baseUrl}`;
  return `${base}neta/ws${config.token ? `?token=${encodeURIComponent(config.token)}` : ""}`;
}

export function sseUrl(config: PageConfig, requestId: string, lastSeq: number): string {
  const params = new URLSearchParams({ requestId });
  if (lastSeq >= 0) params.set("lastEventId", String(lastSeq));
  if (config.token) params.set("token", config.token);
  return `${config.baseUrl}neta/api/agent/run/stream?${params.toString()}`;
}

export function createServerTransport(options: ServerOptions): Transport {
  return closedWith(new ServerTransport(options), options.signal);
}

class ServerTransport implements Transport {
  private readonly env: ServerEnv;
  private lastSeq: number;
  private phase: Phase = "live";
  private onEvents: EventsHandler = () => {};
  private onNotice: NoticeHandler = () => {};
  private probe: ArrivalProbe | null = null;
  private socket: WebSocket | null = null;
  private source: EventSource | null = null;
  private useSse = false;
  private everOpened = false;
  private attempt = 0;
  private timer: unknown = null;
  private pinger: unknown = null;
  private closed = false;
  /** A notice of ours is showing (so events clear it; they need not clear nothing). */
  private noticeShown = false;
  private askedIfImported = false;
  private readonly subscribeId: string;

  constructor(private readonly options: ServerOptions) {
    this.env = options.env ?? browserEnv();
    this.lastSeq = options.lastSeq ?? -1;
    this.subscribeId = `subscribe:${options.requestId}`;
  }

  start(onEvents: EventsHandler, onNotice?: NoticeHandler): void {
    this.onEvents = onEvents;
    this.probe = arrivalProbe();
    const notify = onNotice ?? (() => {});
    this.onNotice = (message) => {
      this.noticeShown = message !== null;
      notify(message);
    };
    this.connect();
  }

  private clearNotice(): void {
    if (this.noticeShown) this.onNotice(null);
  }

  async send(action: RunAction): Promise<void> {
    await postAction(this.env.fetch, this.options.config, action, this.env.cookies());
    // The run goes on (or ends) now, or goes on once its child does: make sure we are there to see it.
    if (!this.socket && !this.source) this.reconnectNow();
  }

  close(): void {
    this.closed = true;
    this.clearTimer();
    this.closeSocket(true);
    this.closeSource();
  }

  // --- both ------------------------------------------------------------------------------

  private connect(): void {
    if (this.closed || this.phase === "ended" || this.phase === "refused") return;
    if (this.useSse) this.openSource();
    else this.openSocket();
  }

  private reconnectNow(): void {
    this.clearTimer();
    this.attempt = 0;
    this.connect();
  }

  private schedule(ms: number): void {
    this.clearTimer();
    this.timer = this.env.setTimeout(() => {
      this.timer = null;
      this.connect();
    }, ms);
  }

  private clearTimer(): void {
    if (this.timer !== null) this.env.clearTimeout(this.timer);
    this.timer = null;
  }

  private deliver(events: readonly unknown[]): void {
    this.probe?.(events);
    let status: string | null = null;
    const fresh = events.filter((event) => {
      const seq = seqOf(event);
      if (seq === undefined) status = liveStatus(event) ?? status;
      if (seq === undefined || seq <= this.lastSeq) return false;
      this.lastSeq = seq;
      this.track(event);
      return true;
    });
    if (fresh.length > 0) {
      this.clearNotice();
      this.onEvents(fresh);
    }
    // A status the server sends live only (never stored, no seq) says why the stream is
    // quiet, until the run's next events arrive.
    if (status !== null) this.onNotice(status);
    if (this.phase === "ended") this.finish();
  }

  private track(event: unknown): void {
    const type = isRecord(event) ? event["eventType"] : undefined;
    const data = isRecord(event) && isRecord(event["data"]) ? event["data"] : {};
    if (type === "MESSAGE_COMPLETED") this.phase = "ended";
    else if (type === "MESSAGE_SUSPENDED") this.phase = "waiting";
    else if (type === "MESSAGE_FAILED") this.phase = data["recoverable"] === true ? "waiting" : "ended";
    else this.phase = "live";
  }

  private finish(): void {
    this.closeSocket(true);
    this.closeSource();
  }

  private refuse(message: string): void {
    this.phase = "refused";
    this.onNotice(message);
    this.finish();
  }

  // --- a run without an event log ----------------------------------------------------------

  /** Show the run as its session's tree has it; the stream has nothing to add. */
  private async fromHistory(): Promise<void> {
    this.phase = "ended";
    this.finish();
    const requestId = this.options.requestId;
    try {
      const run = await this.getJson(`neta/api/${queryPath("status", { requestId })}`);
      const sessionId = str(run["sessionId"]) ?? "";
      const tree = await this.getJson(`neta/api/${queryPath("tree", { sessionId })}`);
      if (this.closed) return;
      this.onEvents(historyEvents(tree, requestId, { status: str(run["status"]) ?? "completed" }));
    } catch (error) {
      if (!this.closed) this.refuse(`This run has no event log and its history could not be read: ${String(error)}`);
    }
  }

  private async getJson(path: string): Promise<Record<string, unknown>> {
    const headers: Record<string, string> = this.options.config.token ? { Authorization: `token ${this.options.config.token}` } : {};
    const response = await this.env.fetch(`${this.options.config.baseUrl}${path}`, { credentials: "same-origin", headers });
    const body: unknown = await response.json().catch(() => null);
    if (!response.ok || !isRecord(body)) throw new Error(`HTTP ${response.status}`);
    return body;
  }

  // --- WebSocket ---------------------------------------------------------------------------

  private openSocket(): void {
    let opened = false;
    const socket = new this.env.WebSocket(wsUrl(this.options.config, this.env.location));
    this.socket = socket;
    socket.onopen = () => {
      opened = true;
      this.attempt = 0;
      // `id` comes back as `replyTo` on the server's answer, so a refusal can be told apart.
      const subscribe: Record<string, unknown> = { type: "subscribe", requestId: this.options.requestId, id: this.subscribeId };
      if (this.lastSeq >= 0) subscribe["lastEventId"] = this.lastSeq;
      socket.send(JSON.stringify(subscribe));
      this.startPing(socket);
    };
    socket.onmessage = (message: MessageEvent) => this.onSocketMessage(message.data);
    socket.onclose = () => {
      if (this.socket !== socket) return;
      this.socket = null;
      this.stopPing();
      if (this.closed || this.phase === "ended" || this.phase === "refused") return;
      this.everOpened ||= opened;
      this.attempt += 1;
      // Never connected, or lost for good: the server (or a proxy) may still speak SSE.
      if (!this.everOpened || this.attempt > WS_ATTEMPTS) {
        this.useSse = true;
        this.attempt = 0;
        this.schedule(0);
        return;
      }
      if (this.attempt > 1) this.onNotice("Connection to the Jupyter server lost, reconnecting…");
      this.schedule(backoffMs(this.attempt - 1));
    };
  }

  private onSocketMessage(raw: unknown): void {
    let frame: unknown;
    try {
      frame = JSON.parse(String(raw));
    } catch {
      return;
    }
    if (Array.isArray(frame)) {
      this.clearNotice();
      this.deliver(frame);
      return;
    }
    if (!isRecord(frame)) return;
    if (frame["type"] === "subscribed") this.clearNotice();
    if (frame["type"] === "error") {
      const message = str(frame["message"]) || str(frame["errCode"]) || "The server reported an error";
      // An error about our run means we cannot follow it; any other is about one bad frame.
      const aboutUs = frame["replyTo"] === this.subscribeId || str(frame["requestId"]) === this.options.requestId;
      if (aboutUs && WITHOUT_LOG.has(str(frame["errCode"]) ?? "")) void this.fromHistory();
      else if (aboutUs) this.refuse(message);
      else this.onNotice(message);
    }
  }

  private startPing(socket: WebSocket): void {
    this.stopPing();
    const ping = () => {
      if (socket.readyState === 1) socket.send(JSON.stringify({ type: "ping" }));
      this.pinger = this.env.setTimeout(ping, PING_MS);
    };
    this.pinger = this.env.setTimeout(ping, PING_MS);
  }

  private stopPing(): void {
    if (this.pinger !== null) this.env.clearTimeout(this.pinger);
    this.pinger = null;
  }

  private closeSocket(unsubscribe: boolean): void {
    const socket = this.socket;
    this.socket = null;
    this.stopPing();
    if (!socket) return;
    if (unsubscribe && socket.readyState === 1) {
      socket.send(JSON.stringify({ type: "unsubscribe", requestId: this.options.requestId }));
    }
    socket.close();
  }

  // --- SSE ------------------------------------------------------------------------------------

  private openSource(): void {
    const url = sseUrl(this.options.config, this.options.requestId, this.lastSeq);
    const source = new this.env.EventSource(url, { withCredentials: true });
    this.source = source;
    const onEvent = (message: MessageEvent) => {
      try {
        this.deliver([JSON.parse(String(message.data))]);
      } catch {
        // not an envelope: ignore (seed 003 §10)
      }
      // The server ends the stream after a terminal event; a waiting run is polled until it goes on.
      if (this.phase === "waiting") {
        this.closeSource();
        this.schedule(SSE_POLL_MS);
      }
    };
    for (const type of EVENT_TYPES) source.addEventListener(type, onEvent);
    source.onopen = () => {
      this.attempt = 0;
      this.clearNotice();
    };
    source.addEventListener("error", (event: Event) => this.onSourceError(source, event));
  }

  private onSourceError(source: EventSource, event: Event): void {
    if (this.source !== source) return;
    this.closeSource();
    // `event: error` from the server carries data (a network error does not): the run is unknown
    // or forbidden (empty), or the store failed ({errCode, message}).
    if ("data" in event && typeof (event as MessageEvent).data === "string") {
      this.refuse(streamError((event as MessageEvent).data as string));
      return;
    }
    if (this.closed || this.phase === "ended" || this.phase === "refused") return;
    if (this.phase === "waiting") {
      this.schedule(SSE_POLL_MS);
      return;
    }
    if (!this.askedIfImported && this.lastSeq < 0) {
      // EventSource hides the reply's status: a run imported from history answers 409, one whose
      // events expired 410.
      this.askedIfImported = true;
      void this.importedOrRetry();
      return;
    }
    this.retrySource();
  }

  private async importedOrRetry(): Promise<void> {
    const path = `neta/api/${queryPath("status", { requestId: this.options.requestId })}`;
    const withoutLog = (run: Record<string, unknown>): boolean => run["imported"] === true || run["eventsExpired"] === true;
    const imported = await this.getJson(path).then(withoutLog, () => false);
    if (imported) await this.fromHistory();
    else if (!this.closed) this.retrySource();
  }

  private retrySource(): void {
    this.attempt += 1;
    if (this.attempt > 1) this.onNotice("Connection to the Jupyter server lost, reconnecting…");
    this.schedule(backoffMs(this.attempt - 1));
  }

  private closeSource(): void {
    this.source?.close();
    this.source = null;
  }
}

/** What a stream refusal says when the run has no event log to follow: read its history. */
const WITHOUT_LOG: ReadonlySet<string> = new Set(["IMPORTED_RUN", "EVENTS_EXPIRED"]);

/** The message of an AGENT_STATUS sent without a seq (the server cannot save events), or null. */
function liveStatus(event: unknown): string | null {
  if (!isRecord(event) || event["eventType"] !== "AGENT_STATUS") return null;
  const data = isRecord(event["data"]) ? event["data"] : {};
  return str(data["message"]) || str(data["code"]) || null;
}

/** What an SSE `error` event says: the server's message when it sent one. */
function streamError(data: string): string {
  try {
    const body: unknown = JSON.parse(data);
    const message = isRecord(body) ? str(body["message"]) : undefined;
    if (message) return message;
  } catch {
    // the seed's error event: empty data
  }
  return "This run cannot be followed: it is unknown or belongs to someone else";
}
