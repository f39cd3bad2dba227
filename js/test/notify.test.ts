import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { labToast, liveEnd, RECENT_MS, tell, type BrowserNotifications, type NotifyEnv, type RunEnd } from "../src/notify";
import { reduceAll } from "../src/reducer";
import { initialState } from "../src/state";
import { showPageToast } from "../src/view/page-toast";
import { mount } from "../src/widget";
import { FakeModel } from "./fake-model";
import { envelope, type Envelope } from "./helpers";
import { harness } from "./view-harness";

const ENDED_AT = "2026-07-24T10:00:00.000Z";
const NOW = Date.parse(ENDED_AT) + 3_000;

function started(requestId = "r_test"): Envelope[] {
  return [
    envelope("SESSION_CREATED", 0, { type: "session", sessionId: "s1" }, requestId),
    envelope("TEXT_START", 1, { type: "text", text: "The answer is 42." }, requestId),
    envelope("TEXT_END", 2, { type: "text" }, requestId),
  ];
}

const completed = (requestId = "r_test") =>
  envelope("MESSAGE_COMPLETED", 3, { type: "message", finishReason: "STOP" }, requestId);

/** `prev` after the run's start, the batch that ends it, and `next`. */
function ending(...batch: Envelope[]) {
  const prev = reduceAll(started());
  return { prev, batch, next: reduceAll(batch, prev) };
}

describe("liveEnd", () => {
  it("tells of a completion seen as it happened", () => {
    const { prev, batch, next } = ending(completed());
    expect(liveEnd(prev, next, batch, NOW, "what is 6*7?")).toEqual({
      key: "r_test#3",
      kind: "completed",
      title: "neta: the run finished",
      body: "The answer is 42.",
    });
  });

  it("tells of a failure with its message", () => {
    const failed = envelope("MESSAGE_FAILED", 3, { type: "message", errorCode: "LLM_ERROR", errorMessage: "the model is down", recoverable: false });
    const { prev, batch, next } = ending(failed);
    expect(liveEnd(prev, next, batch, NOW)).toMatchObject({ kind: "failed", body: "the model is down" });
  });

  it("tells of a run that waits for the user's approval, naming an MCP tool's server", () => {
    const ask = { type: "permission_ask", askId: "a1", toolName: "warehouse__run_query", toolCallId: "c1", arguments: "{}", mcpServer: "warehouse", mcpTool: "run_query" };
    const { prev, batch, next } = ending(
      envelope("PERMISSION_ASK", 3, ask),
      envelope("MESSAGE_SUSPENDED", 4, { type: "message", suspendReason: { type: "PERMISSION_ASK", askId: "a1" } }),
    );
    expect(liveEnd(prev, next, batch, NOW)).toMatchObject({
      kind: "waiting",
      title: "neta: waiting for your approval",
      body: "Allow run_query from warehouse to run?",
    });
  });

  it("tells of a question the agent asks", () => {
    const { prev, batch, next } = ending(
      envelope("CLARIFY_REQUEST", 3, { type: "clarify", clarifyId: "q1", question: "Which year?", options: [] }),
      envelope("MESSAGE_SUSPENDED", 4, { type: "message", suspendReason: { type: "CLARIFY_REQUEST", askId: "q1" } }),
    );
    expect(liveEnd(prev, next, batch, NOW)).toMatchObject({ kind: "waiting", body: "Which year?" });
  });

  it.each(["ASYNC_TOOL_PENDING", "MANUAL_SUSPEND", "SHUTDOWN_INTERRUPT"])("stays quiet for a run suspended for %s", (type) => {
    const { prev, batch, next } = ending(envelope("MESSAGE_SUSPENDED", 3, { type: "message", suspendReason: { type } }));
    expect(liveEnd(prev, next, batch, NOW)).toBeNull();
  });

  it("stays quiet for a replay: the whole run in the view's first batch", () => {
    const batch = [...started(), completed()];
    expect(liveEnd(initialState("r_test"), reduceAll(batch), batch, NOW)).toBeNull();
  });

  it("stays quiet for an end replayed long after it happened", () => {
    const { prev, batch, next } = ending(completed());
    expect(liveEnd(prev, next, batch, Date.parse(ENDED_AT) + RECENT_MS + 1)).toBeNull();
  });

  it("stays quiet for a run rebuilt from its session's history", () => {
    const prev = reduceAll([envelope("SESSION_CREATED", 0, { type: "session", sessionId: "s1", fromHistory: true })]);
    const batch = [completed()];
    expect(prev.fromHistory).toBe(true);
    expect(liveEnd(prev, reduceAll(batch, prev), batch, NOW)).toBeNull();
  });

  it("stays quiet for a batch without a terminal event", () => {
    const prev = reduceAll(started().slice(0, 1));
    const batch = started().slice(1);
    expect(liveEnd(prev, reduceAll(batch, prev), batch, NOW)).toBeNull();
  });
});

function fakeEnv(options: { hidden?: boolean; permission?: string; lab?: boolean } = {}) {
  const shown: string[] = [];
  const toasts: string[] = [];
  const notifications: BrowserNotifications = {
    permission: () => options.permission ?? "granted",
    request: vi.fn(async () => "granted"),
    show: (title, body) => void shown.push(`${title} | ${body}`),
  };
  const env: NotifyEnv = {
    hidden: () => options.hidden ?? true,
    now: () => NOW,
    notifications,
    labToast: (end) => (options.lab ? (toasts.push(`lab: ${end.body}`), true) : false),
    pageToast: (end) => void toasts.push(`page: ${end.body}`),
  };
  return { env, shown, toasts };
}

let keys = 0;
const end = (): RunEnd => ({ key: `r_${keys++}#3`, kind: "completed", title: "neta: the run finished", body: "done" });

describe("tell", () => {
  it("raises a notification and a JupyterLab toast when the page is hidden", () => {
    const { env, shown, toasts } = fakeEnv({ lab: true });
    expect(tell(env, end(), () => {})).toBe(true);
    expect(shown).toEqual(["neta: the run finished | done"]);
    expect(toasts).toEqual(["lab: done"]);
  });

  it("falls back to the page toast, and raises no notification the user has not allowed", () => {
    const { env, shown, toasts } = fakeEnv({ permission: "default" });
    tell(env, end(), () => {});
    expect(shown).toEqual([]);
    expect(toasts).toEqual(["page: done"]);
    expect(env.notifications?.request).not.toHaveBeenCalled();
  });

  it("says nothing while the page is in view, and each end once", () => {
    const visible = fakeEnv({ hidden: false });
    expect(tell(visible.env, end(), () => {})).toBe(false);
    expect([...visible.shown, ...visible.toasts]).toEqual([]);
    const hidden = fakeEnv();
    const once = end();
    tell(hidden.env, once, () => {});
    tell(hidden.env, { ...once }, () => {});
    expect(hidden.shown).toHaveLength(1);
  });
});

describe("JupyterLab's toast", () => {
  afterEach(() => {
    delete (globalThis as Record<string, unknown>)["jupyterapp"];
  });

  it("goes through the app's apputils:notify command when the page exposes the app", () => {
    const execute = vi.fn(async () => "id");
    (globalThis as Record<string, unknown>)["jupyterapp"] = { commands: { execute, hasCommand: (id: string) => id === "apputils:notify" } };
    expect(labToast({ key: "k", kind: "failed", title: "neta: the run failed", body: "boom" })).toBe(true);
    expect(execute).toHaveBeenCalledWith("apputils:notify", {
      message: "neta: the run failed: boom",
      type: "error",
      options: { autoClose: false },
    });
  });

  it("is out of reach without the app", () => {
    expect(labToast(end())).toBe(false);
    (globalThis as Record<string, unknown>)["jupyterapp"] = { commands: { execute: () => {}, hasCommand: () => false } };
    expect(labToast(end())).toBe(false);
  });
});

describe("the page toast", () => {
  beforeEach(() => document.body.replaceChildren());

  it("shows hostile text as text, goes to the run when clicked, and closes", () => {
    const onClick = vi.fn();
    const hostile = { ...end(), body: '<img src=x onerror="alert(1)">' };
    const toast = showPageToast(hostile, onClick);
    expect(document.querySelector("img")).toBeNull();
    expect(toast.textContent).toContain('<img src=x onerror="alert(1)">');
    toast.querySelector<HTMLElement>(".neta-page-toast-message")?.click();
    expect(onClick).toHaveBeenCalledOnce();
    expect(document.querySelector('[data-testid="neta-page-toast"]')).toBeNull();
    showPageToast(end(), onClick).querySelector<HTMLElement>('[data-testid="neta-page-toast-close"]')?.click();
    expect(document.querySelector('[data-testid="neta-page-toast"]')).toBeNull();
    expect(onClick).toHaveBeenCalledOnce();
  });
});

describe("the notify-me control", () => {
  function withPermission(permission: string) {
    let current = permission;
    const request = vi.fn(async () => (current = "granted"));
    const notifications: BrowserNotifications = { permission: () => current, request, show: () => {} };
    return { notifications, request };
  }

  it("asks the browser only on a deliberate click, never on its own", async () => {
    const { notifications, request } = withPermission("default");
    const t = harness({ notifications });
    t.show(reduceAll(started()));
    const control = t.byTestId("neta-notify") as HTMLButtonElement;
    expect(control.hidden).toBe(false);
    expect(request).not.toHaveBeenCalled();
    t.deliberate = false;
    control.click();
    expect(request).not.toHaveBeenCalled();
    t.deliberate = true;
    control.click();
    expect(request).toHaveBeenCalledOnce();
    await vi.waitFor(() => expect(control.hidden).toBe(true));
  });

  it("reads the browser's permission when the run's status changes, not at each delta", () => {
    const { notifications } = withPermission("default");
    const permission = vi.spyOn(notifications, "permission");
    const t = harness({ notifications });
    let state = t.show(reduceAll(started()));
    const reads = permission.mock.calls.length;
    expect(t.byTestId("neta-notify").hidden).toBe(false);
    for (let i = 0; i < 5; i++) {
      state = t.show(reduceAll([envelope("TEXT_DELTA", state.lastSeq + 1, { type: "text", text: `w${i} ` })], state));
    }
    expect(permission.mock.calls.length).toBe(reads);
    t.show(reduceAll([envelope("MESSAGE_COMPLETED", state.lastSeq + 1, { type: "message", finishReason: "STOP" })], state));
    expect(t.byTestId("neta-notify").hidden).toBe(true);
  });

  it("is not shown once the browser has an answer, nor for a run that ended", () => {
    const t = harness({ notifications: withPermission("denied").notifications });
    t.show(reduceAll(started()));
    expect(t.byTestId("neta-notify").hidden).toBe(true);
    const u = harness({ notifications: withPermission("default").notifications });
    u.show(reduceAll([...started(), completed()]));
    expect(u.byTestId("neta-notify").hidden).toBe(true);
  });
});

describe("the widget", () => {
  afterEach(() => {
    vi.useRealTimers();
    vi.restoreAllMocks();
  });

  it("puts up a page toast when its run ends live while the page is hidden, and not for a replay", () => {
    vi.useFakeTimers({ now: NOW });
    vi.spyOn(document, "visibilityState", "get").mockReturnValue("hidden");
    document.body.replaceChildren();
    const toasts = () => document.querySelectorAll('[data-testid="neta-page-toast"]');
    const replayEl = document.createElement("div");
    const replayed = new FakeModel({ request_id: "r_old", mode: "embedded", prompt: "old", snapshot: {} });
    mount(replayed, replayEl);
    replayed.emit("msg:custom", { kind: "events", events: [...started("r_old"), completed("r_old")] });
    expect(toasts()).toHaveLength(0);

    const el = document.createElement("div");
    document.body.append(el);
    const model = new FakeModel({ request_id: "r_live", mode: "embedded", prompt: "what is 6*7?", snapshot: {} });
    mount(model, el);
    model.emit("msg:custom", { kind: "events", events: started("r_live") });
    expect(toasts()).toHaveLength(0);
    model.emit("msg:custom", { kind: "events", events: [completed("r_live")] });
    expect(toasts()).toHaveLength(1);
    expect(toasts()[0]?.textContent).toContain("The answer is 42.");
  });
});
