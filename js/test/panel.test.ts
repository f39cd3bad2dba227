import { describe, expect, it, vi } from "vitest";
import { PanelClient } from "../src/panel/client";
import { InsertActions, codeOf } from "../src/panel/insert";
import { initialState, type RunState } from "../src/state";
import { RunListView } from "../src/panel/list-view";
import { ago, listed, matches, originLabel, parseRuns, tokenLabel, waiting, type RunRow } from "../src/panel/runs";
import { askNotice, badgeLabel, readSettings } from "../src/lab/settings";

function summary(fields: Record<string, unknown>): Record<string, unknown> {
  return {
    requestId: "r1",
    sessionId: "s1",
    status: "running",
    model: "demo",
    prompt: "hello",
    created: 1000,
    usage: { totalTokens: 1500 },
    origin: { kind: "cell", notebookPath: "work/analysis.ipynb", client: null },
    parentRequestId: null,
    pendingAsk: null,
    ...fields,
  };
}

const rows = (...runs: Record<string, unknown>[]): RunRow[] => parseRuns({ runs });

describe("the run list as the server sends it", () => {
  it("reads each run, and leaves out what is not one", () => {
    const parsed = parseRuns({ runs: [summary({}), null, { status: "running" }, "r2", summary({ requestId: "r3", status: "bogus", origin: { kind: "evil" } })] });
    expect(parsed.map((r) => r.requestId)).toEqual(["r1", "r3"]);
    expect(parsed[0]).toMatchObject({ tokens: 1500, origin: { kind: "cell", notebookPath: "work/analysis.ipynb" } });
    // An unknown status or origin is read as the harmless default, not passed through.
    expect(parsed[1]).toMatchObject({ status: "running", origin: { kind: "api" } });
    expect(parseRuns({ runs: "nope" })).toEqual([]);
    expect(parseRuns(null)).toEqual([]);
  });

  it("keeps a pending ask only while the run is suspended", () => {
    const ask = { kind: "permission", askId: "a1", toolCallId: "c1", toolName: "python" };
    const [waits, paused, moved] = rows(
      summary({ status: "suspended", pendingAsk: ask }),
      summary({ requestId: "r2", status: "suspended" }),
      summary({ requestId: "r3", status: "running", pendingAsk: ask }),
    );
    expect(waits?.pendingAsk).toEqual({ kind: "permission", askId: "a1", toolName: "python" });
    expect(paused?.pendingAsk).toBeNull();
    expect(moved?.pendingAsk).toBeNull();
  });

  it("keeps the pending ask of an MCP session's run, whose call waits for it while it runs", () => {
    const ask = { kind: "permission", askId: "a2", toolCallId: "c2", toolName: "edit_cell" };
    const mcp = { kind: "mcp", client: "claude-code" };
    const [live, ended] = rows(
      summary({ status: "running", origin: mcp, pendingAsk: ask }),
      summary({ requestId: "r2", status: "completed", origin: mcp, pendingAsk: ask }),
    );
    expect(live?.pendingAsk).toEqual({ kind: "permission", askId: "a2", toolName: "edit_cell" });
    expect(ended?.pendingAsk).toBeNull();
    expect(waiting([live!, ended!]).map((r) => r.requestId)).toEqual(["r1"]);
  });

  it("says where a run came from in a few words", () => {
    const label = (origin: Record<string, unknown>) => originLabel(rows(summary({ origin }))[0]!.origin);
    expect(label({ kind: "cell", notebookPath: "work/analysis.ipynb" })).toBe("cell · analysis.ipynb");
    expect(label({ kind: "terminal" })).toBe("terminal");
    expect(label({ kind: "mcp", client: "claude-code" })).toBe("MCP · claude-code");
    expect(label({ kind: "mcp" })).toBe("MCP client");
    expect(label({ kind: "api" })).toBe("API");
    expect(label({ kind: "crew" })).toBe("crew task");
    expect(label({ kind: "subagent" })).toBe("sub-agent");
    expect(label({ kind: "panel", notebookPath: "a.ipynb" })).toBe("panel · a.ipynb");
  });
});

describe("filter and search", () => {
  const all = rows(
    summary({ requestId: "r1", prompt: "Plot the sales", status: "running" }),
    summary({ requestId: "r2", prompt: "Summarise", status: "completed", origin: { kind: "terminal" } }),
    summary({ requestId: "r3", prompt: "child task", parentRequestId: "r1", origin: { kind: "subagent" } }),
    summary({ requestId: "r4", prompt: "approve me", status: "suspended", created: 900, pendingAsk: { kind: "clarify", askId: "q" } }),
  );

  it("lists the runs users started, and sub-agents only when searched for", () => {
    expect(listed(all, { status: "all", text: "" }).map((r) => r.requestId)).toEqual(["r1", "r2", "r4"]);
    expect(listed(all, { status: "all", text: "child" }).map((r) => r.requestId)).toEqual(["r3"]);
  });

  it("filters by status and by every word searched, in the prompt, the origin or the model", () => {
    expect(listed(all, { status: "active", text: "" }).map((r) => r.requestId)).toEqual(["r1", "r4"]);
    expect(listed(all, { status: "waiting", text: "" }).map((r) => r.requestId)).toEqual(["r4"]);
    expect(listed(all, { status: "ended", text: "" }).map((r) => r.requestId)).toEqual(["r2"]);
    expect(matches(all[0]!, { status: "all", text: "SALES plot" })).toBe(true);
    expect(matches(all[0]!, { status: "all", text: "sales terminal" })).toBe(false);
    expect(matches(all[1]!, { status: "all", text: "terminal" })).toBe(true);
    expect(matches(all[0]!, { status: "all", text: "analysis.ipynb demo" })).toBe(true);
  });

  it("lists the runs waiting for the user, oldest first", () => {
    expect(waiting(all).map((r) => r.requestId)).toEqual(["r4"]);
  });

  it("tells times and tokens briefly", () => {
    expect(ago(1000, 1030)).toBe("30s ago");
    expect(ago(1000, 1000 + 3 * 3600)).toBe("3h ago");
    expect(ago(1000, 900)).toBe("0s ago");
    expect(tokenLabel(950)).toBe("950 tok");
    expect(tokenLabel(1500)).toBe("1.5k tok");
    expect(tokenLabel(2_500_000)).toBe("2.5M tok");
  });
});

describe("the list view", () => {
  it("shows every string as text, and a row per run in the server's order", () => {
    const chosen: string[] = [];
    const view = new RunListView((run) => chosen.push(run.requestId), () => 1060);
    document.body.append(view.element);
    const hostile = '<img src=x onerror="window.pwned=1"><style>body{display:none}</style>';
    view.update(rows(summary({ requestId: "r1", prompt: hostile }), summary({ requestId: "r2", prompt: "second", origin: { kind: "mcp", client: "<b>agent</b>" } })));
    const shown = [...view.element.querySelectorAll<HTMLElement>("[data-testid=neta-panel-run]")];
    expect(shown.map((row) => row.dataset["requestId"])).toEqual(["r1", "r2"]);
    expect(view.element.querySelector("img, style, b")).toBeNull();
    expect(shown[0]!.querySelector("[data-testid=neta-panel-run-prompt]")!.textContent).toBe(hostile);
    expect(shown[1]!.querySelector("[data-testid=neta-panel-run-meta]")!.textContent).toBe("MCP · <b>agent</b> · demo · 1m ago · 1.5k tok");
    shown[1]!.click();
    expect(chosen).toEqual(["r2"]);
    // The same run updated keeps its row: a click on it is never lost to a redraw.
    view.update(rows(summary({ requestId: "r2", prompt: "second", status: "completed" }), summary({ requestId: "r1", prompt: "first" })));
    const again = [...view.element.querySelectorAll<HTMLElement>("[data-testid=neta-panel-run]")];
    expect(again[0]).toBe(shown[1]);
    expect(again[0]!.dataset["status"]).toBe("completed");
    view.element.remove();
  });
});

describe("the panel's client", () => {
  it("reads the runs and the models with the page's token, and says what the server refused", async () => {
    const seen: string[] = [];
    const answers: Record<string, unknown> = {
      "/base/neta/api/agent/runs": { runs: [summary({})] },
      "/base/neta/api/models": { default: "demo", models: ["demo", 7, "other"] },
    };
    const client = new PanelClient({ baseUrl: "/base/", token: "tok" }, async (url, init) => {
      seen.push(`${url} ${JSON.stringify(init.headers)}`);
      const body = answers[url];
      return new Response(JSON.stringify(body ?? { message: "no such thing" }), { status: body ? 200 : 404 });
    });
    expect((await client.runs()).map((r) => r.requestId)).toEqual(["r1"]);
    expect(await client.models()).toEqual({ default: "demo", models: ["demo", "other"] });
    expect(seen[0]).toContain('"Authorization":"token tok"');
    const bad = new PanelClient({ baseUrl: "/nowhere/" }, async () => new Response("{\"message\":\"no such thing\"}", { status: 404 }));
    await expect(bad.runs()).rejects.toThrow("no such thing");
  });
});

describe("the panel's settings and badge", () => {
  it("reads settings, keeping a default for a value of the wrong kind", () => {
    expect(readSettings({ pollSeconds: 5, notifyAsks: false, bindToNotebook: false, area: "left" })).toEqual({ pollSeconds: 5, notifyAsks: false, bindToNotebook: false, area: "left" });
    expect(readSettings({ pollSeconds: 0, notifyAsks: "yes", area: "top" })).toEqual({ pollSeconds: 2, notifyAsks: true, bindToNotebook: true, area: "right" });
    expect(readSettings(undefined).pollSeconds).toBe(2);
  });

  it("counts the waiting runs on the tab and tells of those that began to wait", () => {
    expect(badgeLabel(0)).toBe("neta");
    expect(badgeLabel(3)).toBe("neta (3)");
    const asks = rows(
      summary({ status: "suspended", pendingAsk: { kind: "permission", askId: "a", toolName: "python" } }),
      summary({ requestId: "r2", status: "suspended", pendingAsk: { kind: "clarify", askId: "q" } }),
    );
    expect(askNotice([])).toBeNull();
    expect(askNotice(asks)).toBe("A neta run asks to run python (and 1 more).");
    expect(askNotice(asks.slice(1))).toBe("A neta run has a question.");
  });
});

describe("inserting a followed run's answer", () => {
  it("takes the code blocks of an answer, in order, and nothing else", () => {
    const answer = "Try this:\n\n```python\nprint(1)\n```\n\nthen\n\n~~~\nx = 2\n~~~\n\n```\n\n```\n";
    expect(codeOf(answer)).toBe("print(1)\n\nx = 2");
    expect(codeOf("no code here, only `inline`")).toBe("");
  });

  it("offers the buttons once the run has ended with an answer, and posts the cell to the server", async () => {
    const posted: unknown[] = [];
    const actions = new InsertActions({ baseUrl: "/" }, () => "work.ipynb", async (url, init) => {
      posted.push([url, JSON.parse(String(init.body))]);
      return new Response(JSON.stringify({ edit: {} }), { status: 200 });
    });
    const running: RunState = { ...initialState("r1"), status: "running", answer: [{ text: "Partial", open: true, synthetic: false }] };
    actions.show(running);
    expect(actions.element.hidden).toBe(true);
    const done: RunState = { ...running, status: "completed", answer: [{ text: "Here:\n\n```python\nprint(2)\n```", open: false, synthetic: false }] };
    actions.show(done);
    expect(actions.element.hidden).toBe(false);
    actions.element.querySelector<HTMLButtonElement>("[data-testid=neta-panel-insert-code]")!.click();
    await vi.waitFor(() => expect(posted).toHaveLength(1));
    expect(posted[0]).toEqual(["/neta/api/notebook/insert", { requestId: "r1", notebookPath: "work.ipynb", cellType: "code", source: "print(2)" }]);
    actions.element.querySelector<HTMLButtonElement>("[data-testid=neta-panel-insert-markdown]")!.click();
    await vi.waitFor(() => expect(posted).toHaveLength(2));
    expect((posted[1] as [string, { source: string }])[1].source).toBe("Here:\n\n```python\nprint(2)\n```");
    await vi.waitFor(() => expect(actions.element.textContent).toContain("Inserted at the end of work.ipynb."));
  });
});
