import { beforeEach, describe, expect, it, vi } from "vitest";
import { attachmentUrl, createCommTransport, readPageConfig, type CommModel, type PageConfig } from "../src/transport";
import { envelope } from "./helpers";

const CONFIG: PageConfig = { baseUrl: "/user/alice/" };
let received: unknown[];
let notices: (string | null)[];
const seqs = () => received.map((e) => (e as { seq: number }).seq);

beforeEach(() => {
  received = [];
  notices = [];
});

// --- page config and URLs -------------------------------------------------------------------------

describe("the Jupyter page", () => {
  it("reads baseUrl from jupyter-config-data, or says there is no server", () => {
    expect(readPageConfig()).toBeNull();
    const script = document.createElement("script");
    script.id = "jupyter-config-data";
    script.type = "application/json";
    script.textContent = JSON.stringify({ baseUrl: "/user/bob", appName: "JupyterLab" });
    document.body.append(script);
    expect(readPageConfig()).toEqual({ baseUrl: "/user/bob/", wsUrl: undefined, token: undefined });
    script.textContent = JSON.stringify({});
    expect(readPageConfig()?.baseUrl).toBe("/");
    script.remove();
  });

  it("builds download URLs, and passes data URLs through", () => {
    expect(attachmentUrl("/sessions/s 1/a.png", CONFIG)).toBe("/user/alice/neta/api/agent/attachment/download?virtualPath=%2Fsessions%2Fs%201%2Fa.png");
    expect(attachmentUrl("data:image/png;base64,AAAA", null)).toBe("data:image/png;base64,AAAA");
    expect(attachmentUrl("/sessions/a.png", null)).toBeNull();
  });
});

// --- comm ---------------------------------------------------------------------------------------

describe("comm transport", () => {
  function fakeModel() {
    const handlers = new Set<(message: unknown) => void>();
    const model = {
      sent: [] as unknown[],
      send(content: unknown) {
        this.sent.push(content);
      },
      on(_name: "msg:custom", callback: (message: unknown) => void) {
        handlers.add(callback);
      },
      off(_name: "msg:custom", callback: (message: unknown) => void) {
        handlers.delete(callback);
      },
      push(message: unknown) {
        handlers.forEach((h) => h(message));
      },
      handlers,
    };
    return model satisfies CommModel;
  }

  it("asks for a replay, receives batches and sends actions", async () => {
    const model = fakeModel();
    const transport = createCommTransport({ model, requestId: () => "r_1", lastSeq: () => -1 });
    transport.start((events) => received.push(...events), (message) => notices.push(message));
    expect(model.sent).toEqual([{ kind: "replay", lastSeq: -1 }]);

    model.push({ kind: "events", events: [envelope("TEXT_START", 0, { type: "text", text: "a" }, "r_1")] });
    model.push({ kind: "something_new" });
    model.push({ kind: "error", message: "The run is gone" });
    expect(seqs()).toEqual([0]);
    expect(notices).toEqual(["The run is gone"]);

    await transport.send({ action: "resume", requestId: "r_1", askId: "ask_1", approved: false, always: false });
    await transport.send({ action: "input", requestId: "r_1", content: "hi" });
    expect(model.sent.slice(1)).toEqual([
      { kind: "action", action: "resume", requestId: "r_1", askId: "ask_1", approved: false, always: false },
      { kind: "action", action: "input", requestId: "r_1", content: "hi" },
    ]);

    transport.close();
    expect(model.handlers.size).toBe(0);
  });

  it("ignores, with a warning, a message of a kind it does not know or with fields of the wrong type", () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    const model = fakeModel();
    createCommTransport({ model, requestId: () => "r_1", lastSeq: () => -1 }).start(
      (events) => received.push(...events),
      (message) => notices.push(message),
    );
    expect(() => {
      model.push({ kind: "hologram", events: [envelope("TEXT_START", 0, { type: "text", text: "a" }, "r_1")] });
      model.push({ kind: "events", events: "not a list" });
      model.push({ kind: "events", events: [], requestId: 7 });
      model.push("events");
    }).not.toThrow();
    expect(received).toEqual([]);
    expect(notices).toEqual([]);
    expect(warn).toHaveBeenCalledTimes(4);
    expect(String(warn.mock.calls[0]![0])).toContain('unknown kind "hologram"');
    warn.mockRestore();
  });

  it("follows a child run by its requestId beside the widget's own, and lets it go when closed", () => {
    const model = fakeModel();
    const own: unknown[] = [];
    const child: unknown[] = [];
    const childNotices: (string | null)[] = [];
    const lifetime = new AbortController();
    createCommTransport({ model, requestId: () => "r_parent", lastSeq: () => 4 }).start((events) => own.push(...events));
    createCommTransport({ model, requestId: () => "r_parent", lastSeq: () => -1, child: "r_child", signal: lifetime.signal }).start(
      (events) => child.push(...events),
      (message) => childNotices.push(message),
    );
    expect(model.sent).toEqual([
      { kind: "replay", lastSeq: 4 },
      { kind: "replay", lastSeq: -1, requestId: "r_child" },
    ]);

    const parentEvent = envelope("TEXT_START", 5, { type: "text", text: "p" }, "r_parent");
    const childEvent = envelope("TEXT_START", 0, { type: "text", text: "c" }, "r_child");
    model.push({ kind: "events", events: [parentEvent] });
    model.push({ kind: "events", events: [childEvent], requestId: "r_child" });
    model.push({ kind: "events", events: [envelope("TEXT_START", 0, {}, "r_other")], requestId: "r_other" });
    model.push({ kind: "error", message: "no such run", requestId: "r_child" });
    expect(own).toEqual([parentEvent]);
    expect(child).toEqual([childEvent]);
    expect(childNotices).toEqual(["no such run"]);

    lifetime.abort();
    expect(model.sent[model.sent.length - 1]).toEqual({ kind: "unsubscribe", requestId: "r_child" });
    expect(model.handlers.size).toBe(1);
  });
});
