/** Tool cards: TOOL_CALL_GENERATING → TOOL_START → TOOL_RUNNING → TOOL_COMPLETED | TOOL_FAILED, plus TOOL_EVENT. */
import type { ToolData, ToolSideData } from "./events";
import { upsert, type McpOrigin, type NotebookEdit, type PermissionAsk, type RunState, type SubagentChild, type ToolCard } from "./state";
import { bool, id, isRecord, num, str, strList, type Loose } from "./wire";

function newCard(toolCallId: string): ToolCard {
  return { toolCallId, toolName: "", argsText: "", status: "generating", truncated: false, images: [], notices: [], streamed: "", edits: [] };
}

/** The MCP server an event says a tool comes from (TOOL_START, PERMISSION_ASK), if any. */
export function readMcp(data: { readonly mcpServer?: unknown; readonly mcpTool?: unknown }): McpOrigin | undefined {
  const server = str(data.mcpServer);
  return server ? { server, tool: str(data.mcpTool) ?? "" } : undefined;
}

function isFinished(card: ToolCard): boolean {
  return card.status === "completed" || card.status === "failed";
}

type CardUpdate = (card: ToolCard, data: Loose<ToolData>) => ToolCard;

const UPDATES: Readonly<Record<string, CardUpdate>> = {
  TOOL_CALL_GENERATING: (card, data) => {
    // Fragments only count before TOOL_START; START's full arguments replace them.
    if (card.status !== "generating") return card;
    return { ...card, argsText: card.argsText + (str(data.arguments) ?? "") };
  },
  TOOL_START: (card, data) => ({
    ...card,
    mcp: readMcp(data) ?? card.mcp,
    argsText: str(data.arguments) ?? card.argsText,
    status: isFinished(card) ? card.status : "running",
  }),
  TOOL_RUNNING: (card, data) => ({
    ...card,
    title: str(data.title) ?? card.title,
    status: isFinished(card) ? card.status : "running",
  }),
  TOOL_COMPLETED: (card, data) => ({ ...finish(card, data), status: "completed" }),
  TOOL_FAILED: (card, data) => ({
    ...finish(card, data),
    status: "failed",
    errorMessage: str(data.errorMessage) ?? card.errorMessage ?? "",
  }),
};

function finish(card: ToolCard, data: Loose<ToolData>): ToolCard {
  const images = strList(data.images);
  return {
    ...card,
    output: str(data.output) ?? card.output,
    truncated: bool(data.truncated) ?? card.truncated,
    outputRef: str(data.outputRef) ?? card.outputRef,
    images: images.length > 0 ? images : card.images,
    durationMs: num(data.durationMs) ?? card.durationMs,
  };
}

export function applyTool(state: RunState, data: Loose<ToolData>, _seq: number, eventType: string): RunState {
  const toolCallId = id(data.toolCallId);
  const update = UPDATES[eventType];
  if (!toolCallId || !update) return state;
  const tools = upsert(state.tools, toolCallId, (prev) => {
    const card = prev ?? newCard(toolCallId);
    const named = { ...card, toolName: str(data.toolName) || card.toolName };
    return update(named, data);
  });
  return { ...state, tools };
}

/** The card of the call an ask is about learns its MCP server (TOOL_START comes once approved). */
export function applyAskedTool(state: RunState, ask: PermissionAsk): RunState {
  const card = ask.toolCallId ? state.tools.byId[ask.toolCallId] : undefined;
  if (!card || !ask.mcp || card.mcp) return state;
  return { ...state, tools: upsert(state.tools, card.toolCallId, () => ({ ...card, mcp: ask.mcp })) };
}

/**
 * The run ended (completed or failed): a call still being prepared or running never finishes now,
 * and a sub-agent still queued or at work was stopped with it (stopping cascades down the tree).
 * A stopped card is not finished: a retried run may start the same call again.
 */
export function settleUnfinished(state: RunState): RunState {
  const openCards = state.tools.order.filter((key) => {
    const status = state.tools.byId[key]?.status;
    return status === "generating" || status === "running";
  });
  const openChildren = state.children.order.filter((key) => UNFINISHED_CHILD.has(state.children.byId[key]?.status ?? ""));
  let tools = state.tools;
  for (const key of openCards) tools = upsert(tools, key, (card) => ({ ...(card ?? newCard(key)), status: "stopped" }));
  let children = state.children;
  for (const key of openChildren) {
    children = upsert(children, key, (child) => ({ ...(child as SubagentChild), status: "stopped", permission: null, clarify: null }));
  }
  return openCards.length || openChildren.length ? { ...state, tools, children } : state;
}

const UNFINISHED_CHILD = new Set(["queued", "running", "suspended"]);

/** Streamed text a card keeps (its end): the result has the whole, the server cuts a runaway loop. */
const MAX_STREAMED_CHARS = 200_000;

/** Categories of TOOL_EVENT the widget understands; others are ignored (seed 003 §3). */
export function applyToolSide(state: RunState, data: Loose<ToolSideData>): RunState {
  const toolCallId = id(data.toolCallId);
  const category = str(data.category);
  if (category === "auth_required" && (!toolCallId || !state.tools.byId[toolCallId])) {
    // The run's model endpoint (or a call the view never saw): shown for the whole run.
    const message = str(data.userMessage) || "Authorization required";
    if (state.authNotices.some((n) => n.message === message)) return state;
    return { ...state, authNotices: [...state.authNotices, { category, message }] };
  }
  if (!toolCallId || !state.tools.byId[toolCallId]) return state;
  if (category === "auth_required") {
    const message = str(data.userMessage) || "Authorization required";
    return {
      ...state,
      tools: upsert(state.tools, toolCallId, (card) => {
        const current = card ?? newCard(toolCallId);
        return { ...current, notices: [...current.notices, { category, message }] };
      }),
    };
  }
  if (category === "notebook_edit") return applyEdit(state, toolCallId, data);
  if (category === "tool_stream_data") {
    const payload = isRecord(data.payload) ? data.payload : {};
    const chunk = str(payload["text"]) ?? str(payload["chunk"]) ?? str(payload["data"]) ?? "";
    if (!chunk) return state;
    return {
      ...state,
      tools: upsert(state.tools, toolCallId, (card) => {
        const current = card ?? newCard(toolCallId);
        return { ...current, streamed: (current.streamed + chunk).slice(-MAX_STREAMED_CHARS) };
      }),
    };
  }
  return state;
}

/** An applied notebook edit, kept on its call's card (a repeat of the same edit is dropped). */
function applyEdit(state: RunState, toolCallId: string, data: Loose<ToolSideData>): RunState {
  const payload = isRecord(data.payload) ? data.payload : {};
  const editId = id(payload["editId"]);
  const card = state.tools.byId[toolCallId];
  if (!editId || !card || card.edits.some((e) => e.editId === editId)) return state;
  const edit: NotebookEdit = {
    editId,
    path: str(payload["path"]) ?? "",
    cellId: str(payload["cellId"]) ?? "",
    kind: str(payload["kind"]) ?? "edit",
    diff: str(payload["diff"]) ?? "",
    message: str(data.userMessage),
    via: str(payload["via"]),
    note: str(payload["note"]),
  };
  return { ...state, tools: upsert(state.tools, toolCallId, () => ({ ...card, edits: [...card.edits, edit] })) };
}
