"""The event catalogue, written from the bodies' declarations and the JSON Schema made of them.

Each body names the event types that carry it, with a sentence for each (``event_types``):
the table of event types is read from there. ``catalogue_schema()`` (what ``python -m
neta_jupyter.events --schema`` prints) gives the envelope and every body; the one-line
docstrings of the models' fields, which the schema does not carry, are read from the models'
source so each field is described where it is listed.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import textwrap
from enum import StrEnum
from typing import Any

from schema_md import anchor, description, fields_table

PREFIX = "event"


def attribute_docs(cls: type) -> dict[str, str]:
    """``{wire name: docstring}`` of the fields documented by a string right after them."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    fields = getattr(cls, "model_fields", {})
    docs: dict[str, str] = {}
    for stmt, after in itertools.pairwise(body):
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
            name = stmt.target.id
            info = fields.get(name)
            wire = (info.serialization_alias or info.alias or name) if info else name
            docs[wire] = " ".join(str(after.value.value).split()).replace("``", "`")
    return docs


def code_list(enum: type[StrEnum]) -> str:
    """An enum of codes: its docstring, then each value with its own docstring if it has one."""
    docs = {}
    source = textwrap.dedent(inspect.getsource(enum))
    body = ast.parse(source).body[0].body  # type: ignore[attr-defined]
    for stmt, after in itertools.pairwise(body):
        if isinstance(stmt, ast.Assign) and isinstance(after, ast.Expr):
            target = stmt.targets[0]
            if isinstance(target, ast.Name) and isinstance(after.value, ast.Constant):
                docs[target.id] = " ".join(str(after.value.value).split())
    head = " ".join((enum.__doc__ or "").split()).replace("``", "`")
    lines = [f"### {enum.__name__}", "", head, ""]
    for member in enum:
        text = docs.get(member.name, "").replace("``", "`")
        lines.append(f"- `{member.value}`" + (f": {text}" if text else ""))
    return "\n".join(lines) + "\n"


def body_section(name: str, schema: dict[str, Any], cls: type | None) -> str:
    """One body (or a type it uses): ``data.type``, description, fields."""
    kind = schema.get("properties", {}).get("type", {}).get("const")
    title = f"{name} (`data.type` = `{kind}`)" if kind else name
    docs = attribute_docs(cls) if cls is not None else {}
    return "\n".join(
        [
            f"({anchor(PREFIX, name)})=",
            f"### {title}",
            "",
            description(schema),
            "",
            fields_table(schema, PREFIX, docs),
        ]
    )


def event_types_section(terminal_types: frozenset[str]) -> list[str]:
    """The table of event types: each with what it says and the body it carries."""
    from neta_jupyter.events.generate import catalogue

    types = catalogue()
    terminal = ", ".join(f"`{t}`" for t in types if t in terminal_types)
    lines = [
        f"({anchor(PREFIX, 'EventType')})=",
        "## Event types",
        "",
        f"A run's stream segment ends with exactly one of {terminal}. Each body declares the "
        "event types that carry it; this table, the `EventType` enum, the JSON Schema and the "
        "widget's TypeScript types are generated from those declarations.",
        "",
        "| event type | what it says | `data` |",
        "|---|---|---|",
    ]
    for event_type, body in types.items():
        said = body.event_types[event_type].replace("|", "\\|")
        link = f"[{body.__name__}](#{anchor(PREFIX, body.__name__)})"
        lines.append(f"| `{event_type}` | {said} | {link} |")
    return [*lines, ""]


def vocabularies(defs: dict[str, Any]) -> list[str]:
    """The schema's closed sets of strings other than the event types, each with its values."""
    return [
        f"({anchor(PREFIX, n)})=\n### {n}\n\n{description(d)}\n\n"
        + "\n".join(f"- `{v}`" for v in d["enum"])
        + "\n"
        for n, d in sorted(defs.items())
        if "enum" in d and d.get("type") == "string" and n != "EventType"
    ]


def events_reference() -> str:
    """The whole page, in MyST markdown."""
    from neta_jupyter.events import crews, models
    from neta_jupyter.events.codes import ErrorCode, FinishReason, StatusCode, SuspendType
    from neta_jupyter.events.encoding import catalogue_schema

    schema = catalogue_schema()
    defs: dict[str, Any] = schema.pop("$defs")
    head = (
        "# Event catalogue\n\n"
        "Generated when the documentation is built from the events' JSON Schema (`python -m "
        "neta_jupyter.events --schema`, the source of the widget's TypeScript types), with each "
        "field's description taken from its model. Event types, `data.type` values, codes and "
        "fields are only ever added, never renamed or removed; clients ignore what they do not "
        "know. How events travel (SSE, WebSocket, resuming with `lastEventId`): "
        "[The run API](../api.md).\n"
    )
    envelope_docs = attribute_docs(models.AgentEvent)
    envelope = "\n".join(
        [
            "## The envelope",
            "",
            description(schema),
            "",
            fields_table(schema, PREFIX, envelope_docs),
        ]
    )
    types = event_types_section(models.TERMINAL_EVENT_TYPES)
    bodies = ["## Bodies and the types they use", ""]
    for name in sorted(defs):
        if "enum" in defs[name] and defs[name].get("type") == "string":
            continue  # vocabularies are listed under Codes
        cls = getattr(models, name, None) or getattr(crews, name, None)
        bodies.append(body_section(name, defs[name], cls))
    codes = ["## Codes", ""] + [
        code_list(e) for e in (ErrorCode, FinishReason, SuspendType, StatusCode)
    ]
    return "\n".join([head, envelope, *types, *bodies, *codes, *vocabularies(defs)])
