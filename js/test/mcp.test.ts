import { describe, expect, it } from "vitest";
import { historyEvents } from "../src/history";
import { reduceAll } from "../src/reducer";
import { toolLabel } from "../src/view/format";
import { envelope, type Envelope } from "./helpers";
import { harness } from "./view-harness";

const ARGS = '{"table": "sales", "limit": 5}';
const WAREHOUSE = { mcpServer: "warehouse", mcpTool: "run_query" };

/** A call asked about, then started: TOOL_START after the ask, as the server sends them. */
function mcpCall(toolName = "warehouse__run_query", mcp: Record<string, string> = WAREHOUSE): Envelope[] {
  const tool = { type: "tool", toolCallId: "c1", toolName };
  const ask = { type: "permission_ask", askId: "a1", toolName, toolCallId: "c1", arguments: ARGS, ...mcp };
  return [
    envelope("SESSION_CREATED", 0, { type: "session", sessionId: "s1" }),
    envelope("TOOL_CALL_GENERATING", 1, { ...tool, arguments: ARGS }),
    envelope("PERMISSION_ASK", 2, ask),
    envelope("MESSAGE_SUSPENDED", 3, { type: "message", suspendReason: { type: "PERMISSION_ASK", askId: "a1" } }),
  ];
}

describe("toolLabel", () => {
  it("names the server only of a tool whose events say it is an MCP server's", () => {
    expect(toolLabel("warehouse__run_query", { server: "warehouse", tool: "run_query" })).toEqual({ tool: "run_query", server: "warehouse" });
    expect(toolLabel("my__helper")).toEqual({ tool: "my__helper" }); // neta's own, "__" and all
    expect(toolLabel("docs__search_every_page_1a2b3c4d", { server: "docs", tool: "search_every_page.v2" })).toEqual({
      tool: "search_every_page.v2", // its own name, not the one cut to fit the model
      server: "docs",
    });
  });
});

describe("an MCP tool in the view", () => {
  it("names its server on the card and in the permission prompt, with the arguments", () => {
    const t = harness();
    t.show(reduceAll(mcpCall()));
    const card = t.byTestId("neta-tool-card");
    expect(card.querySelector(".neta-tool-name")?.textContent).toBe("run_query");
    const badge = t.byTestId("neta-tool-server", card);
    expect(badge.hidden).toBe(false);
    expect(badge.textContent).toBe("from warehouse");
    const prompt = t.byTestId("neta-permission");
    expect(prompt.querySelector(".neta-permission-tool")?.textContent).toBe("run_query");
    expect(t.byTestId("neta-permission-server", prompt).textContent).toBe("warehouse");
    expect(prompt.querySelector(".neta-prompt-title")?.textContent).toBe("Allow run_query from the MCP server warehouse to run?");
    const args = prompt.querySelector(".neta-permission-args")?.textContent ?? "";
    expect(JSON.parse(args)).toEqual({ table: "sales", limit: 5 });
  });

  it("keeps the server on the card once the call starts, and in a session's history", () => {
    const t = harness();
    const started = envelope("TOOL_START", 4, { type: "tool", toolCallId: "c1", toolName: "warehouse__run_query", ...WAREHOUSE, arguments: ARGS });
    t.show(reduceAll([...mcpCall(), started]));
    expect(t.byTestId("neta-tool-server").textContent).toBe("from warehouse");

    const call = { toolCallId: "c1", toolName: "warehouse__run_query", status: "completed", arguments: ARGS, ...WAREHOUSE };
    const entry = { entryId: "e1", role: "assistant", requestId: "r_h", status: "complete", message: { role: "assistant", content: "" }, toolCalls: [call] };
    const past = harness();
    past.show(reduceAll(historyEvents({ sessionId: "s", entries: [entry] }, "r_h", { status: "completed" })));
    expect(past.byTestId("neta-tool-server").textContent).toBe("from warehouse");
  });

  it("shows no server for neta's own tools, even one with __ in its name", () => {
    const t = harness();
    t.show(reduceAll(mcpCall("my__helper", {})));
    expect(t.byTestId("neta-tool-card").querySelector(".neta-tool-name")?.textContent).toBe("my__helper");
    expect(t.byTestId("neta-tool-server").hidden).toBe(true);
    expect(t.all("neta-permission-server")).toEqual([]);
    expect(t.byTestId("neta-permission").querySelector(".neta-prompt-title")?.textContent).toBe("Allow my__helper to run?");
  });

  it("shows no server for neta's plain tools", () => {
    const t = harness();
    t.show(reduceAll(mcpCall("python", {})));
    expect(t.byTestId("neta-tool-server").hidden).toBe(true);
    expect(t.all("neta-permission-server")).toEqual([]);
    expect(t.byTestId("neta-permission").querySelector(".neta-prompt-title")?.textContent).toBe("Allow python to run?");
  });

  it("shows a hostile server name as text", () => {
    const t = harness();
    t.show(reduceAll(mcpCall('<img src=x onerror="alert(1)">__go', { mcpServer: '<img src=x onerror="alert(1)">', mcpTool: "go" })));
    expect(t.container.querySelector("img")).toBeNull();
    expect(t.byTestId("neta-tool-server").textContent).toBe('from <img src=x onerror="alert(1)">');
  });
});
