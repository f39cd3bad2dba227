"""The TypeScript client of the run API, generated from its action table.

Two files, both committed and checked by a test: ``js/schema/api.schema.json`` (the request body
of every action, from which ``npm run gen:types`` makes ``js/src/api-types.ts``) and
``js/src/api.ts`` (each action's route and WebSocket frame type, and a client with one method
per action)::

    python -m neta_jupyter.client.typescript --schema > js/schema/api.schema.json
    python -m neta_jupyter.client.typescript --client > js/src/api.ts
"""

from __future__ import annotations

import json
import sys
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from ..runtime.actions import ACTIONS
from ..runtime.queries import QUERIES

__all__ = ["api_schema", "typescript_client"]

BODIES = "RunApiBodies"
"""The schema's title: the TypeScript interface of every action's body, by action name."""


def api_schema() -> dict[str, Any]:
    """JSON Schema of every action's request body, as the property of the action's name."""
    mode: Literal["validation"] = "validation"
    models: list[tuple[type[BaseModel], Literal["validation"]]] = [
        (a.request, mode) for a in ACTIONS
    ]
    refs, defs = models_json_schema(models, by_alias=True)
    return {
        "title": BODIES,
        "description": "The request body of each action of the run API, by the action's name.",
        "type": "object",
        "properties": {action.name: refs[(action.request, "validation")] for action in ACTIONS},
        "required": [action.name for action in ACTIONS],
        "additionalProperties": False,
        **defs,
    }


def _method(name: str, summary: str) -> str:
    return "\n".join(
        [
            f"  /** {summary}. */",
            f"  {name}(body: ActionBodies[{json.dumps(name)}]): Promise<unknown> {{",
            f"    return this.send({json.dumps(name)}, body);",
            "  }",
        ]
    )


def _query_row(name: str, route: str, required: list[str], optional: list[str]) -> str:
    fields = f"route: {json.dumps(route)}, required: {json.dumps(required)}"
    return f"  {json.dumps(name)}: {{ {fields}, optional: {json.dumps(optional)} }},"


_CLIENT = """\
/* Generated from the run API's action table (neta_jupyter/runtime/actions.py) by
 * `python -m neta_jupyter.client.typescript --client > js/src/api.ts`. Do not edit. */
import type {{ {bodies} }} from "./api-types";

/** The request body of each action, by the action's name. */
export type ActionBodies = {bodies};
export type ActionName = keyof ActionBodies;

/** Each action's REST route (`POST`, under `neta/api/`) and its WebSocket frame type. */
export const ACTIONS = {{
{table}
}} as const satisfies Record<ActionName, {{ readonly route: string; readonly frame: string }}>;

/** Sends a body to a route of the run API; resolves with the JSON answer. */
export type Post = (route: string, body: unknown) => Promise<unknown>;

/** The run API's actions as methods, over any way of sending a body to a route. */
export class RunApi {{
  constructor(private readonly post: Post) {{}}

  /** Sends the action's body to its route. */
  send<K extends ActionName>(name: K, body: ActionBodies[K]): Promise<unknown> {{
    return this.post(ACTIONS[name].route, body);
  }}

{methods}
}}

/** Each query's REST route (`GET`, under `neta/api/`) and its parameters. */
export const QUERIES = {{
{queries}
}} as const;
export type QueryName = keyof typeof QUERIES;
type RequiredOf<K extends QueryName> = (typeof QUERIES)[K]["required"][number];
type OptionalOf<K extends QueryName> = (typeof QUERIES)[K]["optional"][number];

/** A query's path under `neta/api/`, with its parameters. */
export function queryPath<K extends QueryName>(
  name: K,
  params: Record<RequiredOf<K>, string> & Partial<Record<OptionalOf<K>, string>>,
): string {{
  const given: [string, string | undefined][] = Object.entries(params);
  const search = given
    .filter((entry): entry is [string, string] => entry[1] !== undefined)
    .map(([key, value]) => `${{key}}=${{encodeURIComponent(value)}}`)
    .join("&");
  return search ? `${{QUERIES[name].route}}?${{search}}` : QUERIES[name].route;
}}
"""
"""``js/src/api.ts``, to be filled in from the tables."""


def typescript_client() -> str:
    """``js/src/api.ts``: the actions' routes, frames and methods, the queries' routes."""
    table = "\n".join(
        f"  {json.dumps(a.name)}: {{ route: {json.dumps(a.route)}, frame: {json.dumps(a.frame)} }},"
        for a in ACTIONS
    )
    queries = "\n".join(
        _query_row(
            q.name,
            q.route,
            [p.name for p in q.params if p.required],
            [p.name for p in q.params if not p.required],
        )
        for q in QUERIES
    )
    methods = "\n\n".join(_method(a.name, a.summary) for a in ACTIONS)
    return _CLIENT.format(bodies=BODIES, table=table, methods=methods, queries=queries)


def main(argv: list[str]) -> int:
    """``--schema`` or ``--client`` on stdout."""
    if argv == ["--schema"]:
        sys.stdout.write(json.dumps(api_schema(), indent=2) + "\n")
    elif argv == ["--client"]:
        sys.stdout.write(typescript_client())
    else:
        sys.stderr.write("usage: python -m neta_jupyter.client.typescript --schema | --client\n")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
