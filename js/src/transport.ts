/**
 * How events reach the widget and actions leave it. Two transports behind one interface:
 *
 * - server (`mode == "server"` on a page served by Jupyter): follows the run over the server's
 *   WebSocket (SSE when that cannot connect); actions go to the REST API. See transport-server.ts.
 * - comm (embedded, or no Jupyter page): the kernel pushes the run's events as custom messages and
 *   takes actions back (the messages are typed in comm.ts).
 *
 * Either follows one run: the widget's own, or a child of it that the view opened; either sends
 * actions for any run, since each action names its run.
 */
import type { RunAction } from "./actions";
import { RunApi, type ActionBodies } from "./api";
import { onAbort } from "./lifetime";
import { actionMessage, isAbout, readKernelMessage, replayMessage, unsubscribeMessage } from "./comm";
import type { ImagePolicy } from "./sanitize";
import { isRecord, str } from "./wire";

const API = "neta/api/";
const DOWNLOAD = `${API}agent/attachment/download`;

export type EventsHandler = (events: readonly unknown[]) => void;
/** A message about the connection or an action (null clears the previous one). */
export type NoticeHandler = (message: string | null) => void;

/**
 * Name of a global function that, when a page defines it before a transport starts, is called
 * with every batch of events as it arrives, before anything is done with them. Benchmark B6
 * defines it to time arrival to text on screen; absent (always, outside that benchmark), nothing
 * is called.
 */
export const ARRIVAL_PROBE = "__netaEventsArrived";

export type ArrivalProbe = (events: readonly unknown[]) => void;

/** The page's arrival probe, if it defines one (read once per transport: a global is slow). */
export function arrivalProbe(): ArrivalProbe | null {
  const probe: unknown = (globalThis as Record<string, unknown>)[ARRIVAL_PROBE];
  return typeof probe === "function" ? (probe as ArrivalProbe) : null;
}

export interface Transport {
  start(onEvents: EventsHandler, onNotice?: NoticeHandler): void;
  /** Resolves when the action was accepted; rejects with an Error carrying the server's message. */
  send(action: RunAction): Promise<void>;
  close(): void;
}

/** Close `transport` when `signal` aborts (the view that started it went away); returns it. */
export function closedWith<T extends Transport>(transport: T, signal: AbortSignal | undefined): T {
  if (signal) onAbort(signal, () => transport.close());
  return transport;
}

// --- the Jupyter page -------------------------------------------------------------------------

export interface PageConfig {
  /** Always ends with "/". */
  readonly baseUrl: string;
  /** WebSocket base when the page names one (JupyterHub setups); otherwise derived from the page. */
  readonly wsUrl?: string;
  /** Token from the page config, when the page uses token auth rather than cookies. */
  readonly token?: string;
  /** Hosts whose images in model output load without a click (`c.NetaApp.image_hosts`). */
  readonly imageHosts?: readonly string[];
}

/** The `jupyter-config-data` script of a page served by Jupyter, or null (VS Code, static HTML). */
export function readPageConfig(doc: Document = document): PageConfig | null {
  const element = doc.getElementById("jupyter-config-data");
  if (!element?.textContent) return null;
  try {
    const data: unknown = JSON.parse(element.textContent);
    if (!isRecord(data)) return null;
    return {
      baseUrl: withSlash(str(data["baseUrl"]) || "/"),
      wsUrl: str(data["wsUrl"]) ? withSlash(str(data["wsUrl"]) ?? "") : undefined,
      token: str(data["token"]) || undefined,
      imageHosts: stringList(data["netaImageHosts"]),
    };
  } catch {
    return null;
  }
}

function stringList(value: unknown): string[] | undefined {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === "string") : undefined;
}

function withSlash(url: string): string {
  return url.endsWith("/") ? url : `${url}/`;
}

/**
 * Where an attachment or image can be fetched: data/blob URLs (embedded mode) as they are, virtual
 * paths through the download endpoint when there is a server, otherwise nowhere.
 */
export function attachmentUrl(path: string, config: PageConfig | null): string | null {
  if (/^(data|blob):/i.test(path)) return path;
  if (!config) return null;
  return `${config.baseUrl}${DOWNLOAD}?virtualPath=${encodeURIComponent(path)}`;
}

/** What may load in model output on this page (see sanitize.ts). */
export function imagePolicy(config: PageConfig | null): ImagePolicy {
  if (!config) return { attachmentPath: null, hosts: [] };
  const base = new URL(config.baseUrl, document.baseURI).pathname;
  return { attachmentPath: `${withSlash(base)}${DOWNLOAD}`, hosts: config.imageHosts ?? [] };
}

// --- REST actions ----------------------------------------------------------------------------

export type Fetch = (url: string, init: RequestInit) => Promise<Response>;

/** The REST body of an action (DESIGN §5); `action` itself is the endpoint, not a field. */
export function actionBody(action: RunAction): Record<string, unknown> {
  const { action: _name, ...fields } = action;
  return fields;
}

export function cookie(name: string, cookies: string = document.cookie): string | undefined {
  for (const part of cookies.split(";")) {
    const [key, ...rest] = part.trim().split("=");
    if (key === name) return decodeURIComponent(rest.join("="));
  }
  return undefined;
}

/** The action, sent to its route with the generated client (api.ts) over `fetchImpl`. */
export async function postAction(fetchImpl: Fetch, config: PageConfig, action: RunAction, cookies?: string): Promise<void> {
  const api = new RunApi((route, body) => postJson(fetchImpl, config, route, body, cookies));
  // actions.ts checks at compile time that each view action's body is its action's body.
  await api.send(action.action, actionBody(action) as unknown as ActionBodies[RunAction["action"]]);
}

/** POST `body` to a route of the run API; resolves with the answer, rejects with its message. */
export async function postJson(fetchImpl: Fetch, config: PageConfig, route: string, body: unknown, cookies?: string): Promise<unknown> {
  const headers: Record<string, string> = { "Content-Type": "application/json" };
  const xsrf = cookie("_xsrf", cookies);
  if (xsrf) headers["X-XSRFToken"] = xsrf;
  if (config.token) headers["Authorization"] = `token ${config.token}`;
  let response: Response;
  try {
    response = await fetchImpl(`${config.baseUrl}${API}${route}`, {
      method: "POST",
      credentials: "same-origin",
      headers,
      body: JSON.stringify(body),
    });
  } catch {
    throw new Error("Could not reach the Jupyter server");
  }
  const answer: unknown = await response.json().catch(() => null);
  if (response.ok && !(isRecord(answer) && answer["success"] === false)) return answer;
  const message = isRecord(answer) ? str(answer["message"]) : undefined;
  throw new Error(message || `The server refused the request (HTTP ${response.status})`);
}

// --- comm (embedded) ---------------------------------------------------------------------------

/** The part of anywidget's model the comm transport uses. */
export interface CommModel {
  send(content: unknown, callbacks?: unknown, buffers?: unknown): void;
  on(name: "msg:custom", callback: (message: unknown, buffers?: unknown) => void): void;
  off(name: "msg:custom", callback: (message: unknown, buffers?: unknown) => void): void;
}

export interface CommOptions {
  readonly model: CommModel;
  /** The widget's run's id now (the trait may be filled in after the view started). */
  readonly requestId: () => string;
  /** Highest seq this view has applied, -1 for none: the kernel resends everything after it. */
  readonly lastSeq: () => number;
  /** Follow this child run of the widget's run instead of the widget's own. */
  readonly child?: string;
  /** Closes the transport when it aborts. */
  readonly signal?: AbortSignal;
}

export function createCommTransport(options: CommOptions): Transport {
  const { model, child } = options;
  const own = child === undefined;
  const followed = (): string => child ?? options.requestId();
  let handler: ((message: unknown) => void) | null = null;
  let closed = false;
  const transport: Transport = {
    start(onEvents, onNotice) {
      if (closed) return;
      const probe = own ? arrivalProbe() : null;
      handler = (raw) => {
        const message = readKernelMessage(raw);
        if (!message || !isAbout(message, followed(), own)) return;
        if (message.kind === "events") {
          probe?.(message.events);
          onEvents(message.events);
        } else {
          onNotice?.(message.message);
        }
      };
      model.on("msg:custom", handler);
      model.send(replayMessage(options.lastSeq(), child));
    },
    async send(action) {
      model.send(actionMessage(action));
    },
    close() {
      closed = true;
      if (!handler) return;
      model.off("msg:custom", handler);
      handler = null;
      if (child !== undefined) model.send(unsubscribeMessage(child));
    },
  };
  return closedWith(transport, options.signal);
}
