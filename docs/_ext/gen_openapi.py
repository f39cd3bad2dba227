"""The run API reference, written from the OpenAPI document the server itself serves.

``neta_jupyter.server.openapi.document()`` is built from the same route table the server
registers, so this page lists exactly the routes, parameters and bodies the server accepts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from schema_md import anchor, cell, description, fields_table, type_words

PREFIX = "api"


def body_words(content: dict[str, Any]) -> str:
    """What a request or response carries: a schema link per media type."""
    parts = []
    for media, spec in content.items():
        schema = spec.get("schema") or {}
        kind = type_words(schema, PREFIX) if schema else "see the description"
        parts.append(f"`{media}`: {kind}")
    return "; ".join(parts)


def operation_section(path: str, method: str, op: dict[str, Any]) -> str:
    """One route and method: summary, query parameters, body, answers."""
    lines = [f"### `{method.upper()} {path}`", "", str(op.get("summary", "")).strip(), ""]
    params = op.get("parameters", [])
    if params:
        lines += ["| query parameter | type | required |", "|---|---|---|"]
        for p in params:
            kind = type_words(p.get("schema", {}), PREFIX)
            lines.append(f"| `{p['name']}` | {cell(kind)} | {'yes' if p.get('required') else ''} |")
        lines.append("")
    if "requestBody" in op:
        lines += [f"Body: {body_words(op['requestBody'].get('content', {}))}", ""]
    answers = []
    for status, answer in op.get("responses", {}).items():
        content = answer.get("content")
        carried = f" ({body_words(content)})" if content else ""
        answers.append(f"`{status}` {answer.get('description', '')}{carried}")
    lines += ["Answers: " + ", ".join(answers), ""]
    return "\n".join(lines)


def schema_section(name: str, schema: dict[str, Any]) -> str:
    """One component schema: its description and its fields."""
    return "\n".join(
        [
            f"({anchor(PREFIX, name)})=",
            f"### {name}",
            "",
            description(schema),
            "",
            fields_table(schema, PREFIX),
        ]
    )


def api_reference(out_dir: Path) -> str:
    """The whole page; also writes ``openapi.json`` beside it for download."""
    from neta_jupyter.server.openapi import document

    doc = document("/")
    (out_dir / "openapi.json").write_text(json.dumps(doc, indent=2) + "\n")
    head = (
        "# Run API reference\n\n"
        "Generated when the documentation is built from the OpenAPI document the server serves "
        "at `GET /neta/api/openapi.json` (download it: {download}`openapi.json <openapi.json>`). "
        "Paths are relative to the server's `base_url`; every route needs Jupyter "
        "authentication. How to use the API — authentication, errors, the event stream, the "
        "WebSocket, the Python client — is in [The run API](../api.md); the events themselves "
        "in the [event catalogue](events.md).\n"
    )
    routes = ["## Routes\n"]
    for path, ops in doc["paths"].items():
        routes += [operation_section(path, method, op) for method, op in ops.items()]
    schemas = ["## Bodies\n"]
    for name, schema in doc.get("components", {}).get("schemas", {}).items():
        schemas.append(schema_section(name, schema))
    return "\n".join([head, *routes, *schemas])
