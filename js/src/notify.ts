/**
 * Telling the user that a run ended (completed, failed, or stopped to wait for them) while its
 * page was hidden: a browser notification, when the user allowed them, and a toast they find on
 * coming back — JupyterLab's own (its `apputils:notify` command) when the page exposes its app,
 * otherwise the widget's page toast.
 *
 * Only an end seen as it happened counts, never one replayed: the view must have followed the run
 * before the batch that ends it, the run must not be rebuilt from history, and the terminal event
 * must be recent (a page reloaded long after the run ended replays its end one event at a time
 * over SSE, which would otherwise look live). Each end is told once per page, however many views
 * of the run the page shows.
 */
import { finalText, type RunState } from "./state";
import { stoppedText, toolLabel, wasStopped } from "./view/format";
import { isRecord, isTerminal, str } from "./wire";

/** A terminal event older than this, by the server's clock against the page's, is a replay. */
export const RECENT_MS = 120_000;
const BODY_CHARS = 160;

export type EndKind = "completed" | "failed" | "waiting";

export interface RunEnd {
  /** One per end of a run: the run and the seq of its terminal event. */
  readonly key: string;
  readonly kind: EndKind;
  readonly title: string;
  readonly body: string;
}

const WAITING_FOR_USER = new Set(["PERMISSION_ASK", "CLARIFY_REQUEST"]);

function short(text: string): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length <= BODY_CHARS ? flat : `${flat.slice(0, BODY_CHARS - 1)}…`;
}

function timestampOf(events: readonly unknown[]): number | null {
  const terminal = [...events].reverse().find(isTerminal);
  const stamp = isRecord(terminal) ? str(terminal["timestamp"]) : undefined;
  const ms = stamp ? Date.parse(stamp) : Number.NaN;
  return Number.isNaN(ms) ? null : ms;
}

function describe(state: RunState, prompt: string): Omit<RunEnd, "key"> | null {
  const about = short(prompt);
  if (state.status === "completed") {
    return { kind: "completed", title: "neta: the run finished", body: short(finalText(state)) || about };
  }
  if (wasStopped(state)) {
    const why = stoppedText(state);
    return { kind: "completed", title: "neta: the run was stopped", body: why === "Stopped" ? about : short(why) };
  }
  if (state.status === "failed") {
    return { kind: "failed", title: "neta: the run failed", body: short(state.failure?.errorMessage || about) };
  }
  if (state.status !== "suspended" || !WAITING_FOR_USER.has(state.suspendReason?.type ?? "")) return null;
  if (state.clarify) return { kind: "waiting", title: "neta: the agent asks you", body: short(state.clarify.question) };
  const label = toolLabel(state.permission?.toolName ?? "", state.permission?.mcp);
  const tool = label.server ? `${label.tool} from ${label.server}` : label.tool || "a tool";
  return { kind: "waiting", title: "neta: waiting for your approval", body: `Allow ${short(tool)} to run?` };
}

/** The end `events` brought about (turning `prev` into `next`) if it was seen live, else null. */
export function liveEnd(prev: RunState, next: RunState, events: readonly unknown[], now: number, prompt = ""): RunEnd | null {
  if (next.fromHistory || prev.lastSeq < 0) return null;
  const at = timestampOf(events);
  if (at === null || now - at > RECENT_MS) return null;
  const end = describe(next, prompt);
  return end ? { ...end, key: `${next.requestId ?? ""}#${next.lastSeq}` } : null;
}

/** The browser's notifications, as far as the widget uses them. */
export interface BrowserNotifications {
  permission(): string;
  request(): Promise<string>;
  show(title: string, body: string, tag: string, onClick: () => void): void;
}

export interface NotifyEnv {
  hidden(): boolean;
  now(): number;
  readonly notifications: BrowserNotifications | null;
  /** Shows JupyterLab's toast; false when the page's app cannot be reached. */
  labToast(end: RunEnd): boolean;
  /** The widget's own toast on the page. */
  pageToast(end: RunEnd, onClick: () => void): void;
}

const told = new Set<string>();

/** Tell of `end` (once per page) if the page is hidden; `focus` brings the run's view forward. */
export function tell(env: NotifyEnv, end: RunEnd | null, focus: () => void): boolean {
  if (!end || told.has(end.key) || !env.hidden()) return false;
  told.add(end.key);
  if (env.notifications?.permission() === "granted") env.notifications.show(end.title, end.body, end.key, focus);
  if (!env.labToast(end)) env.pageToast(end, focus);
  return true;
}

// --- the browser's side --------------------------------------------------------------------

export function browserNotifications(): BrowserNotifications | null {
  if (typeof Notification === "undefined") return null;
  return {
    permission: () => Notification.permission,
    request: () => Notification.requestPermission(),
    show(title, body, tag, onClick) {
      const shown = new Notification(title, { body, tag });
      shown.onclick = () => {
        window.focus();
        onClick();
        shown.close();
      };
    },
  };
}

interface LabCommands {
  execute(id: string, args: Record<string, unknown>): Promise<unknown>;
  hasCommand(id: string): boolean;
}

const LAB_NOTIFY = "apputils:notify";
const LAB_TYPES: Readonly<Record<EndKind, string>> = { completed: "success", failed: "error", waiting: "warning" };

/** JupyterLab's command registry, when the page exposes its app (`window.jupyterapp`). */
function labCommands(): LabCommands | null {
  const app: unknown = (globalThis as Record<string, unknown>)["jupyterapp"];
  const commands = isRecord(app) ? app["commands"] : undefined;
  if (!isRecord(commands) || typeof commands["execute"] !== "function" || typeof commands["hasCommand"] !== "function") return null;
  const registry = commands as unknown as LabCommands;
  return registry.hasCommand(LAB_NOTIFY) ? registry : null;
}

export function labToast(end: RunEnd): boolean {
  const commands = labCommands();
  if (!commands) return false;
  // The toast waits for the user: they were away when it came.
  const args = { message: `${end.title}: ${end.body}`, type: LAB_TYPES[end.kind], options: { autoClose: false } };
  commands.execute(LAB_NOTIFY, args).catch(() => {});
  return true;
}
