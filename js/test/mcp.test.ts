import { describe, expect, it } from "vitest";
import { reduceAll } from "../src/reducer";
import { toolLabel } from "../src/view/format";
import { envelope, type Envelope } from "./helpers";
import { harness } from "./view-harness";

const ARGS = '{"table": "sales", "limit": 5}';

function mcpCall(toolName = "warehouse__run_query"): Envelope[] {
  const tool = { type: "tool", toolCallId: "c1", toolName };
  return [
    envelope("SESSION_CREATED", 0, { type: "session", sessionId: "s1" }),
    envelope("TOOL_START", 1, { ...tool, arguments: ARGS }),
    envelope("PERMISSION_ASK", 2, { type: "permission_ask", askId: "a1", toolName, toolCallId: "c1", arguments: ARGS }),
    envelope("MESSAGE_SUSPENDED", 3, { type: "message", suspendReason: { type: "PERMISSION_ASK", askId: "a1" } }),
  ];
}

describe("toolLabel", () => {
  it.each([
    ["warehouse__run_query", { tool: "run_query", server: "warehouse" }],
    ["docs__search__v2", { tool: "search__v2", server: "docs" }],
    ["python", { tool: "python" }],
    ["__hidden", { tool: "__hidden" }],
    ["trailing__", { tool: "trailing__" }],
    ["", { tool: "" }],
  ])("%s", (name, label) => {
    expect(toolLabel(name)).toEqual(label);
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

  it("shows no server for neta's own tools", () => {
    const t = harness();
    t.show(reduceAll(mcpCall("python")));
    expect(t.byTestId("neta-tool-server").hidden).toBe(true);
    expect(t.all("neta-permission-server")).toEqual([]);
    expect(t.byTestId("neta-permission").querySelector(".neta-prompt-title")?.textContent).toBe("Allow python to run?");
  });

  it("shows a hostile server name as text", () => {
    const t = harness();
    t.show(reduceAll(mcpCall('<img src=x onerror="alert(1)">__go')));
    expect(t.container.querySelector("img")).toBeNull();
    expect(t.byTestId("neta-tool-server").textContent).toBe('from <img src=x onerror="alert(1)">');
  });
});
