/* Generated from the run API's action table (neta_jupyter/runtime/actions.py) by
 * `python -m neta_jupyter.client.typescript --client > js/src/api.ts`. Do not edit. */
import type { RunApiBodies } from "./api-types";

/** The request body of each action, by the action's name. */
export type ActionBodies = RunApiBodies;
export type ActionName = keyof ActionBodies;

/** Each action's REST route (`POST`, under `neta/api/`) and its WebSocket frame type. */
export const ACTIONS = {
  "start": { route: "agent/run/async", frame: "chat" },
  "resume": { route: "agent/run/resumeTask", frame: "resume" },
  "retry": { route: "agent/run/retryTask", frame: "retry" },
  "terminate": { route: "agent/run/terminateTask", frame: "terminate" },
  "suspend": { route: "agent/run/suspendTask", frame: "suspend" },
  "input": { route: "agent/run/addSupplementaryInput", frame: "supplementary_input" },
  "import": { route: "agent/run/import", frame: "import" },
  "compact": { route: "sessions/compact", frame: "compact" },
  "leaf": { route: "sessions/leaf", frame: "switch_leaf" },
  "thinking_level": { route: "sessions/thinkingLevel", frame: "set_thinking_level" },
} as const satisfies Record<ActionName, { readonly route: string; readonly frame: string }>;

/** Sends a body to a route of the run API; resolves with the JSON answer. */
export type Post = (route: string, body: unknown) => Promise<unknown>;

/** The run API's actions as methods, over any way of sending a body to a route. */
export class RunApi {
  constructor(private readonly post: Post) {}

  /** Sends the action's body to its route. */
  send<K extends ActionName>(name: K, body: ActionBodies[K]): Promise<unknown> {
    return this.post(ACTIONS[name].route, body);
  }

  /** Start a run. */
  start(body: ActionBodies["start"]): Promise<unknown> {
    return this.send("start", body);
  }

  /** Resume a suspended run. */
  resume(body: ActionBodies["resume"]): Promise<unknown> {
    return this.send("resume", body);
  }

  /** Retry a recoverable failure. */
  retry(body: ActionBodies["retry"]): Promise<unknown> {
    return this.send("retry", body);
  }

  /** Cancel a run. */
  terminate(body: ActionBodies["terminate"]): Promise<unknown> {
    return this.send("terminate", body);
  }

  /** Pause a running run at its next step boundary. */
  suspend(body: ActionBodies["suspend"]): Promise<unknown> {
    return this.send("suspend", body);
  }

  /** Add input to a running run. */
  input(body: ActionBodies["input"]): Promise<unknown> {
    return this.send("input", body);
  }

  /** Register a history run without a stream. */
  import(body: ActionBodies["import"]): Promise<unknown> {
    return this.send("import", body);
  }

  /** Compact a session now. */
  compact(body: ActionBodies["compact"]): Promise<unknown> {
    return this.send("compact", body);
  }

  /** Move a session's current leaf; the session's tree. */
  leaf(body: ActionBodies["leaf"]): Promise<unknown> {
    return this.send("leaf", body);
  }

  /** Set how hard the model thinks in a session's next runs. */
  thinking_level(body: ActionBodies["thinking_level"]): Promise<unknown> {
    return this.send("thinking_level", body);
  }
}

/** Each query's REST route (`GET`, under `neta/api/`) and its parameters. */
export const QUERIES = {
  "status": { route: "agent/run/status", required: ["requestId"], optional: [] },
  "runs": { route: "agent/runs", required: [], optional: ["sessionId"] },
  "sessions": { route: "sessions", required: [], optional: [] },
  "tree": { route: "sessions/tree", required: ["sessionId"], optional: [] },
  "models": { route: "models", required: [], optional: [] },
  "mcp": { route: "mcp", required: [], optional: [] },
} as const;
export type QueryName = keyof typeof QUERIES;
type RequiredOf<K extends QueryName> = (typeof QUERIES)[K]["required"][number];
type OptionalOf<K extends QueryName> = (typeof QUERIES)[K]["optional"][number];

/** A query's path under `neta/api/`, with its parameters. */
export function queryPath<K extends QueryName>(
  name: K,
  params: Record<RequiredOf<K>, string> & Partial<Record<OptionalOf<K>, string>>,
): string {
  const given: [string, string | undefined][] = Object.entries(params);
  const search = given
    .filter((entry): entry is [string, string] => entry[1] !== undefined)
    .map(([key, value]) => `${key}=${encodeURIComponent(value)}`)
    .join("&");
  return search ? `${QUERIES[name].route}?${search}` : QUERIES[name].route;
}
