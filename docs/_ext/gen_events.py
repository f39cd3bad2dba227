"""The event catalogue, written from the JSON Schema the widget's TypeScript types come from.

``catalogue_schema()`` (what ``python -m neta_jupyter.events --schema`` prints) gives the
envelope and every body; the one-line docstrings of the models' fields, which the schema does not
carry, are read from the models' source so each field is described where it is listed.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import textwrap
from enum import StrEnum
from pathlib import Path
from typing import Any

from schema_md import anchor, description, fields_table

PREFIX = "event"


def emitted_bodies(package: Path) -> dict[str, set[str]]:
    """``{event type: body class names}`` from the package's calls ``f(EventType.X, XData(…))``."""
    found: dict[str, set[str]] = {}
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            for kind, body in itertools.pairwise(node.args):
                if not (
                    isinstance(kind, ast.Attribute)
                    and isinstance(kind.value, ast.Name)
                    and kind.value.id == "EventType"
                    and isinstance(body, ast.Call)
                ):
                    continue
                func = body.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
                if name.endswith("Data"):
                    found.setdefault(kind.attr, set()).add(name)
    return found


def body_of(event_type: str, emitted: dict[str, set[str]], kinds: dict[str, str]) -> list[str]:
    """The bodies an event type carries: as the code emits it, else by the naming of both.

    ``kinds`` maps ``data.type`` to the body's name; without an emitting call in view (a body
    built elsewhere and passed on), the body is the one whose ``data.type`` is the longest prefix
    of the event type (``SKILL_MISSING`` carries ``skill``).
    """
    if event_type in emitted:
        return sorted(emitted[event_type])
    lowered = event_type.lower()
    matches = [k for k in kinds if lowered == k or lowered.startswith(k + "_")]
    return [kinds[max(matches, key=len)]] if matches else []


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


def events_reference() -> str:
    """The whole page, in MyST markdown."""
    from neta_jupyter.events import models
    from neta_jupyter.events.codes import (
        TERMINAL_EVENT_TYPES,
        ErrorCode,
        EventType,
        FinishReason,
        StatusCode,
        SuspendType,
    )
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
    terminal = ", ".join(f"`{t.value}`" for t in EventType if t in TERMINAL_EVENT_TYPES)
    import neta_jupyter

    emitted = emitted_bodies(Path(neta_jupyter.__file__).parent)
    kinds = {
        d["properties"]["type"]["const"]: name
        for name, d in defs.items()
        if "const" in d.get("properties", {}).get("type", {})
    }
    types = [
        f"({anchor(PREFIX, 'EventType')})=",
        "## Event types",
        "",
        f"A run's stream segment ends with exactly one of {terminal}. The body each type carries "
        "is read from the code that emits it.",
        "",
        "| event type | `data` |",
        "|---|---|",
    ]
    for t in EventType:
        bodies = body_of(t.value, emitted, kinds)
        links = ", ".join(f"[{b}](#{anchor(PREFIX, b)})" for b in bodies) or "see the run API"
        types.append(f"| `{t.value}` | {links} |")
    types.append("")
    bodies = ["## Bodies and the types they use", ""]
    for name in sorted(defs):
        if "enum" in defs[name] and defs[name].get("type") == "string":
            continue  # vocabularies are listed under Codes
        bodies.append(body_section(name, defs[name], getattr(models, name, None)))
    codes = ["## Codes", ""] + [
        code_list(e) for e in (ErrorCode, FinishReason, SuspendType, StatusCode)
    ]
    enum_defs = [
        f"({anchor(PREFIX, n)})=\n### {n}\n\n{description(d)}\n\n"
        + "\n".join(f"- `{v}`" for v in d["enum"])
        + "\n"
        for n, d in sorted(defs.items())
        if "enum" in d and d.get("type") == "string" and n != "EventType"
    ]
    return "\n".join([head, envelope, *types, *bodies, *codes, *enum_defs])
