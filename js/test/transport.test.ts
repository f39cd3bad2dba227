import { beforeEach, describe, expect, it, vi } from "vitest";
import type { Action } from "../src/actions";
import { ARRIVAL_PROBE, postAction, type PageConfig } from "../src/transport";
import { reduceAll } from "../src/reducer";
import { backoffMs, createServerTransport, sseUrl, type ServerEnv } from "../src/transport-server";
import { envelope, fixture } from "./helpers";
import { IMPORTED_TREE } from "./history-tree";

// --- fakes ---------------------------------------------------------------------------------------

class FakeSocket {
  static all: FakeSocket[] = [];
  readyState = 0;
  sent: unknown[] = [];
  onopen: (() => void) | null = null;
  onmessage: ((event: { data: string }) => void) | null = null;
  onclose: (() => void) | null = null;
  closedByClient = false;

  constructor(readonly url: string) {
    FakeSocket.all.push(this);
  }
  send(data: string): void {
    this.sent.push(JSON.parse(data));
  }
  close(): void {
    this.closedByClient = true;
    this.drop();
  }
  open(): void {
    this.readyState = 1;
    this.onopen?.();
  }
  receive(frame: unknown): void {
    this.onmessage?.({ data: JSON.stringify(frame) });
  }
  drop(): void {
    if (this.readyState === 3) return;
    this.readyState = 3;
    this.onclose?.();
  }
}

class FakeSource {
  static all: FakeSource[] = [];
  listeners = new Map<string, ((event: Event) => void)[]>();
  onopen: (() => void) | null = null;
  closed = false;

  constructor(readonly url: string, readonly init?: EventSourceInit) {
    FakeSource.all.push(this);
  }
  addEventListener(type: string, listener: (event: Event) => void): void {
    this.listeners.set(type, [...(this.listeners.get(type) ?? []), listener]);
  }
  close(): void {
    this.closed = true;
  }
  emit(event: Record<string, unknown> & { eventType: string }): void {
    const message = new MessageEvent(event.eventType, { data: JSON.stringify(event), lastEventId: String(event["seq"] ?? "") });
    this.listeners.get(event.eventType)?.forEach((l) => l(message));
  }
  fail(): void {
    this.listeners.get("error")?.forEach((l) => l(new Event("error")));
  }
  serverError(data = ""): void {
    this.listeners.get("error")?.forEach((l) => l(new MessageEvent("error", { data })));
  }
}

class Timers {
  now = 0;
  private next = 1;
  pending = new Map<number, { due: number; callback: () => void }>();
  setTimeout = (callback: () => void, ms: number): unknown => {
    const handle = this.next++;
    this.pending.set(handle, { due: this.now + ms, callback });
    return handle;
  };
  clearTimeout = (handle: unknown): void => {
    this.pending.delete(handle as number);
  };
  advance(ms: number): void {
    const until = this.now + ms;
    for (;;) {
      const due = [...this.pending].filter(([, t]) => t.due <= until).sort((a, b) => a[1].due - b[1].due)[0];
      if (!due) break;
      this.pending.delete(due[0]);
      this.now = due[1].due;
      due[1].callback();
    }
    this.now = until;
  }
}

const CONFIG: PageConfig = { baseUrl: "/user/alice/" };
let timers: Timers;
let fetchMock: ReturnType<typeof vi.fn<ServerEnv["fetch"]>>;
let env: ServerEnv;
let received: unknown[];
let notices: (string | null)[];

beforeEach(() => {
  FakeSocket.all = [];
  FakeSource.all = [];
  timers = new Timers();
  fetchMock = vi.fn<ServerEnv["fetch"]>(async () => new Response(JSON.stringify({ success: true }), { status: 200 }));
  env = {
    WebSocket: FakeSocket as unknown as ServerEnv["WebSocket"],
    EventSource: FakeSource as unknown as ServerEnv["EventSource"],
    fetch: fetchMock,
    location: { protocol: "https:", host: "hub.example:8443" },
    cookies: () => "theme=dark; _xsrf=2|ab%3D|cd|17; other=1",
    setTimeout: timers.setTimeout,
    clearTimeout: timers.clearTimeout,
  };
  received = [];
  notices = [];
});

function startServer(requestId = "r_basic", lastSeq?: number) {
  const transport = createServerTransport({ config: CONFIG, requestId, lastSeq, env });
  transport.start(
    (events) => received.push(...events),
    (message) => notices.push(message),
  );
  return transport;
}

const lastSocket = () => FakeSocket.all[FakeSocket.all.length - 1]!;
const lastSource = () => FakeSource.all[FakeSource.all.length - 1]!;
const seqs = () => received.map((e) => (e as { seq: number }).seq);

// --- WebSocket ---------------------------------------------------------------------------------

describe("server transport over WebSocket", () => {
  const events = fixture("basic_run");

  it("subscribes to the run under the page's base URL", () => {
    startServer();
    const socket = lastSocket();
    expect(socket.url).toBe("wss://hub.example:8443/user/alice/neta/ws");
    socket.open();
    expect(socket.sent).toEqual([{ type: "subscribe", requestId: "r_basic", id: "subscribe:r_basic" }]);
  });

  it("resubscribes from the seq the view already has", () => {
    startServer("r_basic", 4);
    lastSocket().open();
    expect(lastSocket().sent).toEqual([{ type: "subscribe", requestId: "r_basic", id: "subscribe:r_basic", lastEventId: 4 }]);
  });

  it("delivers array frames and ignores pong and subscribed", () => {
    startServer();
    const socket = lastSocket();
    socket.open();
    socket.receive({ type: "subscribed", requestId: "r_basic" });
    socket.receive(events.slice(0, 3));
    socket.receive({ type: "pong" });
    socket.receive(events.slice(3, 6));
    expect(seqs()).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it("hands every batch to the arrival probe the page defined when it started, before filtering", () => {
    const batches: unknown[][] = [];
    const global = globalThis as Record<string, unknown>;
    global[ARRIVAL_PROBE] = (batch: unknown[]) => batches.push(batch);
    try {
      startServer();
    } finally {
      delete global[ARRIVAL_PROBE];
    }
    const socket = lastSocket();
    socket.open();
    socket.receive(events.slice(0, 3));
    socket.receive(events.slice(2, 5));
    expect(batches.map((batch) => batch.map((e) => (e as { seq: number }).seq))).toEqual([[0, 1, 2], [2, 3, 4]]);
    expect(seqs()).toEqual([0, 1, 2, 3, 4]);
    // A transport started without one calls nothing.
    received = [];
    startServer("r_other");
    lastSocket().open();
    lastSocket().receive(events.slice(0, 2));
    expect(batches).toHaveLength(2);
  });

  it("reconnects after a drop and resumes from the last seq, without duplicates", () => {
    startServer();
    lastSocket().open();
    lastSocket().receive(events.slice(0, 10));
    lastSocket().drop();
    expect(FakeSocket.all).toHaveLength(1);
    timers.advance(backoffMs(0));
    expect(FakeSocket.all).toHaveLength(2);
    lastSocket().open();
    const withSeq = events.filter((e) => e.seq !== undefined);
    const last = Math.max(...events.slice(0, 10).map((e) => e.seq ?? -1));
    expect(lastSocket().sent[0]).toEqual({ type: "subscribe", requestId: "r_basic", id: "subscribe:r_basic", lastEventId: last });
    lastSocket().receive(withSeq.slice(last - 2, last + 4));
    expect(seqs()).toEqual([...Array(last + 4).keys()]);
  });

  it("says the connection is lost when a reconnect fails, and clears that once, when events flow again", () => {
    startServer();
    lastSocket().open();
    lastSocket().receive(events.slice(0, 3));
    lastSocket().drop();
    timers.advance(backoffMs(0));
    lastSocket().drop();
    expect(notices).toEqual(["Connection to the Jupyter server lost, reconnecting…"]);
    timers.advance(backoffMs(1));
    lastSocket().open();
    lastSocket().receive(events.slice(3, 6));
    lastSocket().receive(events.slice(6, 9));
    expect(notices).toEqual(["Connection to the Jupyter server lost, reconnecting…", null]);
    expect(seqs()).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
  });

  it("shows a status the server sends without a seq until the run's events flow again", () => {
    startServer();
    lastSocket().open();
    lastSocket().receive(events.slice(0, 3));
    const status = {
      eventType: "AGENT_STATUS",
      requestId: "r_basic",
      data: { type: "agent_status", code: "STORAGE_UNAVAILABLE", level: "ERROR", message: "The server cannot save this run's events: the disk is full." },
    };
    lastSocket().receive([status]);
    expect(notices).toEqual(["The server cannot save this run's events: the disk is full."]);
    lastSocket().receive(events.slice(3, 6));
    expect(notices).toEqual(["The server cannot save this run's events: the disk is full.", null]);
    expect(seqs()).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it("stays subscribed through a suspension and keeps receiving the resumed run", () => {
    const perm = fixture("permission_resume");
    const cut = perm.findIndex((e) => e.eventType === "MESSAGE_SUSPENDED") + 1;
    startServer("r_perm");
    const socket = lastSocket();
    socket.open();
    socket.receive(perm.slice(0, cut));
    expect(socket.closedByClient).toBe(false);
    socket.receive(perm.slice(cut));
    expect(received).toHaveLength(perm.length);
    // Completed: unsubscribe, close, and never come back.
    expect(socket.sent[socket.sent.length - 1]).toEqual({ type: "unsubscribe", requestId: "r_perm" });
    expect(socket.closedByClient).toBe(true);
    timers.advance(60_000);
    expect(FakeSocket.all).toHaveLength(1);
  });

  it("stops on an error about its run, and only reports other errors", () => {
    startServer();
    const socket = lastSocket();
    socket.open();
    socket.receive({ type: "error", errCode: "BAD_FRAME", message: "Unknown message type" });
    expect(notices).toEqual(["Unknown message type"]);
    expect(socket.closedByClient).toBe(false);
    socket.receive({ type: "error", errCode: "RUN_NOT_FOUND", message: "No such run", requestId: "r_basic" });
    expect(notices[notices.length - 1]).toBe("No such run");
    expect(socket.closedByClient).toBe(true);
    timers.advance(60_000);
    expect(FakeSocket.all).toHaveLength(1);
    expect(FakeSource.all).toHaveLength(0);
  });

  it("stops when the server refuses the subscription (error replying to it)", () => {
    startServer("r_gone");
    const socket = lastSocket();
    socket.open();
    socket.receive({ type: "error", errCode: "RUN_NOT_FOUND", message: "no run r_gone", replyTo: "subscribe:r_gone" });
    expect(notices).toEqual(["no run r_gone"]);
    expect(socket.closedByClient).toBe(true);
    timers.advance(60_000);
    expect(FakeSocket.all).toHaveLength(1);
  });

  it("pings to keep the connection alive", () => {
    startServer();
    lastSocket().open();
    timers.advance(30_000);
    expect(lastSocket().sent).toContainEqual({ type: "ping" });
  });

  it("close() unsubscribes and stops reconnecting", () => {
    const transport = startServer();
    const socket = lastSocket();
    socket.open();
    transport.close();
    expect(socket.sent[socket.sent.length - 1]).toEqual({ type: "unsubscribe", requestId: "r_basic" });
    timers.advance(60_000);
    expect(FakeSocket.all).toHaveLength(1);
  });
});

// --- SSE fallback ---------------------------------------------------------------------------------

describe("server transport falling back to SSE", () => {
  function failWebSocket() {
    const transport = startServer("r_perm");
    lastSocket().drop(); // never opened
    timers.advance(0);
    return transport;
  }

  it("uses SSE when the WebSocket cannot connect", () => {
    failWebSocket();
    expect(FakeSource.all).toHaveLength(1);
    expect(lastSource().url).toBe("/user/alice/neta/api/agent/run/stream?requestId=r_perm");
    expect(lastSource().init).toEqual({ withCredentials: true });
  });

  it("reads named events, resumes after an error from the last id, waits while suspended", async () => {
    const perm = fixture("permission_resume");
    const cut = perm.findIndex((e) => e.eventType === "MESSAGE_SUSPENDED") + 1;
    const transport = failWebSocket();
    perm.slice(0, 3).forEach((e) => lastSource().emit(e));
    lastSource().emit({ eventType: "HEARTBEAT", requestId: "r_perm", data: { type: "heartbeat" } });
    lastSource().fail();
    expect(lastSource().closed).toBe(true);
    timers.advance(backoffMs(0));
    expect(lastSource().url).toBe("/user/alice/neta/api/agent/run/stream?requestId=r_perm&lastEventId=2");
    perm.slice(2, cut).forEach((e) => lastSource().emit(e));
    expect(seqs()).toEqual([...Array(cut).keys()]);
    // Suspended: the stream is closed and polled slowly until the run goes on.
    expect(lastSource().closed).toBe(true);
    const sources = FakeSource.all.length;
    await transport.send({ action: "resume", requestId: "r_perm", askId: "ask_1", approved: true, always: false });
    expect(FakeSource.all.length).toBe(sources + 1);
    expect(lastSource().url).toContain(`lastEventId=${cut - 1}`);
    perm.slice(cut).forEach((e) => lastSource().emit(e));
    expect(received).toHaveLength(perm.length);
  });

  it("stops when the server says the run is unknown or forbidden", () => {
    failWebSocket();
    lastSource().serverError();
    expect(lastSource().closed).toBe(true);
    expect(notices[notices.length - 1]).toMatch(/cannot be followed/);
    timers.advance(60_000);
    expect(FakeSource.all).toHaveLength(1);
  });

  it("stops with the server's message when the store fails mid-stream", () => {
    failWebSocket();
    lastSource().emit(fixture("permission_resume")[0]!);
    lastSource().serverError(JSON.stringify({ errCode: "STORAGE_DAMAGED", message: "the database file is damaged" }));
    expect(lastSource().closed).toBe(true);
    expect(notices[notices.length - 1]).toBe("the database file is damaged");
    timers.advance(60_000);
    expect(FakeSource.all).toHaveLength(1);
  });
});

// --- REST actions -----------------------------------------------------------------------------

describe("actions over REST", () => {
  it.each<[Action, string, Record<string, unknown>]>([
    [{ action: "resume", askId: "ask_1", approved: true, always: true }, "resumeTask", { requestId: "r_1", askId: "ask_1", approved: true, always: true }],
    [{ action: "resume", askId: "cl_1", answer: "b" }, "resumeTask", { requestId: "r_1", askId: "cl_1", answer: "b" }],
    [{ action: "terminate" }, "terminateTask", { requestId: "r_1" }],
    [{ action: "retry" }, "retryTask", { requestId: "r_1" }],
    [{ action: "input", content: "more" }, "addSupplementaryInput", { requestId: "r_1", content: "more" }],
  ])("%o posts to %s", async (action, endpoint, body) => {
    await postAction(fetchMock, CONFIG, { ...action, requestId: "r_1" }, "_xsrf=2|ab%3D|cd|17");
    const [url, init] = fetchMock.mock.calls[0]!;
    expect(url).toBe(`/user/alice/neta/api/agent/run/${endpoint}`);
    expect(init).toMatchObject({
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-XSRFToken": "2|ab=|cd|17" },
    });
    expect(JSON.parse(String(init.body))).toEqual(body);
  });

  it("rejects with the server's message", async () => {
    fetchMock.mockResolvedValueOnce(
      new Response(JSON.stringify({ httpStatusCode: 409, message: "Run is not suspended", success: false, errCode: "CONFLICT", requestId: "r_1" }), { status: 409 }),
    );
    await expect(postAction(fetchMock, CONFIG, { action: "retry", requestId: "r_1" })).rejects.toThrow("Run is not suspended");
    fetchMock.mockResolvedValueOnce(new Response("<html>", { status: 502 }));
    await expect(postAction(fetchMock, CONFIG, { action: "retry", requestId: "r_1" })).rejects.toThrow("HTTP 502");
    fetchMock.mockRejectedValueOnce(new TypeError("network"));
    await expect(postAction(fetchMock, CONFIG, { action: "retry", requestId: "r_1" })).rejects.toThrow("Could not reach");
  });

  it("adds the page's token where the page uses token auth", async () => {
    await postAction(fetchMock, { baseUrl: "/", token: "t0k" }, { action: "retry", requestId: "r_1" }, "");
    expect(fetchMock.mock.calls[0]![1].headers).toEqual({ "Content-Type": "application/json", Authorization: "token t0k" });
    expect(sseUrl({ baseUrl: "/", token: "t0k" }, "r 1", 3)).toBe("/neta/api/agent/run/stream?requestId=r+1&lastEventId=3&token=t0k");
  });
});

// --- a run without an event log ------------------------------------------------------------------

describe("a run imported from history", () => {
  const answers = (url: string): Response => {
    if (url.includes("run/status")) return new Response(JSON.stringify({ requestId: "r_hist", sessionId: "s_hist", status: "completed", imported: true }));
    if (url.includes("sessions/tree")) return new Response(JSON.stringify(IMPORTED_TREE));
    return new Response("{}", { status: 404 });
  };
  const settle = () => new Promise((resolve) => setTimeout(resolve, 0));

  it("is rebuilt from its session's tree when the socket says it has no stream", async () => {
    fetchMock.mockImplementation(async (url) => answers(url));
    startServer("r_hist");
    const socket = lastSocket();
    socket.open();
    socket.receive({ type: "error", errCode: "IMPORTED_RUN", message: "no event stream", replyTo: "subscribe:r_hist" });
    await settle();
    await settle();
    expect(fetchMock.mock.calls.map(([url]) => url)).toEqual([
      "/user/alice/neta/api/agent/run/status?requestId=r_hist",
      "/user/alice/neta/api/sessions/tree?sessionId=s_hist",
    ]);
    const state = reduceAll(received);
    expect(state.status).toBe("completed");
    expect(state.tools.order).toEqual(["call_a", "call_b"]);
    expect(state.processes.byId["op_1"]).toMatchObject({ stage: "profile", status: "completed" });
    expect(state.fromHistory).toBe(true);
    expect(socket.closedByClient).toBe(true);
  });

  it("is rebuilt over SSE too, where the refusal is only a failed connection", async () => {
    fetchMock.mockImplementation(async (url) => answers(url));
    startServer("r_hist");
    lastSocket().drop(); // never opened: SSE
    timers.advance(0);
    lastSource().fail();
    for (let i = 0; i < 4; i += 1) await settle();
    expect(reduceAll(received).answer.map((s) => s.text)).toEqual(["Sales has **40** rows."]);
    expect(timers.pending.size).toBe(0); // nothing more to follow
  });
});

describe("a run whose events expired", () => {
  const answers = (url: string): Response => {
    if (url.includes("run/status")) return new Response(JSON.stringify({ requestId: "r_hist", sessionId: "s_hist", status: "completed", lastSeq: -1, eventsExpired: true }));
    if (url.includes("sessions/tree")) return new Response(JSON.stringify(IMPORTED_TREE));
    return new Response("{}", { status: 404 });
  };
  const settle = () => new Promise((resolve) => setTimeout(resolve, 0));

  it("is shown from its session's tree when the socket says its events expired", async () => {
    fetchMock.mockImplementation(async (url) => answers(url));
    startServer("r_hist");
    const socket = lastSocket();
    socket.open();
    socket.receive({ type: "error", errCode: "EVENTS_EXPIRED", message: "deleted", requestId: "r_hist", replyTo: "subscribe:r_hist" });
    for (let i = 0; i < 4; i += 1) await settle();
    const state = reduceAll(received);
    expect(state.fromHistory).toBe(true);
    expect(state.answer.map((s) => s.text)).toEqual(["Sales has **40** rows."]);
    expect(notices).not.toContain("deleted");
    expect(socket.closedByClient).toBe(true);
  });

  it("is shown from history over SSE too, where the refusal is only a failed connection", async () => {
    fetchMock.mockImplementation(async (url) => answers(url));
    startServer("r_hist");
    lastSocket().drop(); // never opened: SSE
    timers.advance(0);
    lastSource().fail();
    for (let i = 0; i < 4; i += 1) await settle();
    expect(fetchMock.mock.calls.map(([url]) => url)).toContain("/user/alice/neta/api/sessions/tree?sessionId=s_hist");
    const state = reduceAll(received);
    expect(state.fromHistory).toBe(true);
    expect(state.answer.map((s) => s.text)).toEqual(["Sales has **40** rows."]);
    expect(timers.pending.size).toBe(0); // nothing more to follow
  });
});
