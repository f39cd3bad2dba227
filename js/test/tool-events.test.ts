import { describe, expect, it } from "vitest";
import { reduce, reduceAll } from "../src/reducer";
import { initialState } from "../src/state";
import { RunView } from "../src/view/run-view";
import { FakeClock } from "./clock";
import { envelope, type Envelope } from "./helpers";

const tool = { type: "tool", toolCallId: "c1", toolName: "python" };
const side = { type: "tool_side", toolCallId: "c1", toolName: "python" };

function streaming(): Envelope[] {
  return [
    envelope("SESSION_CREATED", 0, { type: "session", sessionId: "s1" }),
    envelope("TOOL_START", 1, { ...tool, arguments: '{"code": "work()"}' }),
    envelope("TOOL_EVENT", 2, { ...side, category: "tool_stream_data", payload: { text: "row 0\n", index: 0 } }),
    envelope("TOOL_EVENT", 3, { ...side, category: "tool_stream_data", payload: { text: "row 1\nrow 2\n", index: 1 } }),
  ];
}

const modelAuth = envelope("TOOL_EVENT", 4, {
  type: "tool_side",
  toolCallId: "model",
  toolName: "model",
  category: "auth_required",
  payload: { model: "openai:gpt-4o", variable: "OPENAI_API_KEY" },
  userMessage: "openai:gpt-4o needs an API key: set the environment variable OPENAI_API_KEY",
});

describe("TOOL_EVENT", () => {
  it("appends streamed output to its card in order", () => {
    expect(reduceAll(streaming()).tools.byId["c1"]?.streamed).toBe("row 0\nrow 1\nrow 2\n");
  });

  it("ignores a category it does not know, whatever it carries", () => {
    const before = reduceAll(streaming());
    for (const category of ["quota_hint_from_the_future", "", "AUTH_REQUIRED"]) {
      const after = reduce(
        before,
        envelope("TOOL_EVENT", 4, { ...side, category, userMessage: "unseen", payload: { text: "unseen" } }),
      );
      expect({ ...after, lastSeq: before.lastSeq }).toEqual(before);
      expect(after.lastSeq).toBe(4);
    }
  });

  it("keeps the model endpoint's missing key for the whole run, once", () => {
    const state = reduceAll([...streaming(), modelAuth, { ...modelAuth, seq: 5 }]);
    expect(state.authNotices).toEqual([{ category: "auth_required", message: modelAuth.data["userMessage"] }]);
    expect(state.tools.byId["c1"]?.notices).toEqual([]);
  });

  it("shows streamed output in the running card and the variable to set in view", () => {
    document.body.replaceChildren();
    const container = document.createElement("div");
    document.body.append(container);
    const view = new RunView(container, { onAction: async () => {}, resolveUrl: () => null, clock: new FakeClock() });
    view.update(reduceAll([...streaming(), modelAuth]));
    view.flush();
    const streamed = container.querySelector<HTMLElement>(".neta-tool-streamed");
    expect(streamed?.textContent).toBe("row 0\nrow 1\nrow 2\n");
    expect(streamed?.hidden).toBe(false);
    const notice = container.querySelector<HTMLElement>('[data-testid="neta-auth-notice"]');
    expect(notice?.hidden).toBe(false);
    expect(notice?.textContent).toContain("OPENAI_API_KEY");
    expect(notice?.getAttribute("role")).toBe("alert");
    view.update(reduce(reduceAll(streaming()), envelope("TOOL_COMPLETED", 4, { ...tool, output: "done" })));
    view.flush();
    expect(streamed?.hidden).toBe(true); // the result replaces the live output
    expect(notice?.hidden).toBe(true);
    expect(initialState().authNotices).toEqual([]);
  });
});
