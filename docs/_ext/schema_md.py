"""JSON Schema fragments as short MyST text: a type in words, a table of an object's fields."""

from __future__ import annotations

import json
from typing import Any

Schema = dict[str, Any]


def anchor(prefix: str, name: str) -> str:
    """The MyST target of a schema's section (lowercase: Sphinx compares labels so)."""
    return f"{prefix}-{name}".lower()


def type_words(schema: Schema, prefix: str) -> str:
    """``string``, ``integer or null``, ``array of [RunSummary](#…)``, ``"a" | "b"``."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{anchor(prefix, name)})"
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " or ".join(type_words(s, prefix) for s in schema[key])
    kind = schema.get("type")
    if kind == "array":
        return f"array of {type_words(schema.get('items', {}), prefix)}"
    if kind == "object" and "additionalProperties" in schema:
        values = schema["additionalProperties"]
        if isinstance(values, dict) and values:
            return f"object of {type_words(values, prefix)}"
        return "object"
    if isinstance(kind, list):
        return " or ".join(f"`{k}`" for k in kind)
    return f"`{kind}`" if kind else "any"


def limits(schema: Schema) -> str:
    """Constraints worth knowing before sending a value: bounds and lengths."""
    found: list[str] = []
    for part in [schema, *schema.get("anyOf", [])]:
        for key, word in (
            ("minimum", "≥"),
            ("maximum", "≤"),
            ("exclusiveMinimum", ">"),
            ("minLength", "length ≥"),
            ("maxLength", "length ≤"),
            ("minItems", "items ≥"),
            ("maxItems", "items ≤"),
        ):
            if key in part:
                found.append(f"{word} {part[key]}")
    return ", ".join(found)


def cell(text: str) -> str:
    """Text made safe for one cell of a markdown table."""
    return " ".join(text.split()).replace("|", "\\|")


def fields_table(schema: Schema, prefix: str, docs: dict[str, str] | None = None) -> str:
    """A table of an object schema's properties; ``docs`` adds descriptions the schema lacks."""
    properties: dict[str, Schema] = schema.get("properties", {})
    if not properties:
        return "No fields.\n"
    required = set(schema.get("required", []))
    rows = ["| field | type | required | default | description |", "|---|---|---|---|---|"]
    for name, prop in properties.items():
        default = f"`{json.dumps(prop['default'])}`" if "default" in prop else ""
        text = prop.get("description") or (docs or {}).get(name, "")
        bounds = limits(prop)
        if bounds:
            text = f"{text} ({bounds})" if text else bounds
        rows.append(
            f"| `{name}` | {cell(type_words(prop, prefix))} | {'yes' if name in required else ''}"
            f" | {cell(default)} | {cell(text)} |"
        )
    return "\n".join(rows) + "\n"


def description(schema: Schema) -> str:
    """A schema's description with reStructuredText literals turned into markdown ones."""
    return str(schema.get("description", "")).replace("``", "`").strip()
