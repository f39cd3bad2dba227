"""Crew definitions from YAML or JSON text and files, with errors that name the line at fault."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from ..runtime.nesting import MAX_NESTING
from .definition import CrewDefinition, CrewDefinitionError, checked

_INDEX = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def parse_text(text: str, source: str = "definition") -> CrewDefinition:
    """The crew a YAML (or JSON, which YAML reads too) document defines."""
    try:
        _check_nesting(text, source)
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise CrewDefinitionError(f"{source} is not valid YAML: {problem}", line=line) from exc
    if not isinstance(data, dict):
        raise CrewDefinitionError(f"{source} must be a mapping with agents and tasks", line=1)
    try:
        return checked(data)
    except CrewDefinitionError as exc:
        if exc.field is None or node is None:
            raise
        raise CrewDefinitionError(
            exc.reason, field=exc.field, line=line_of(node, exc.field)
        ) from exc


def _check_nesting(text: str, source: str) -> None:
    """Refuse deep nesting from the parser's events, before anything recursive (composing) runs."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_NESTING:
                line = event.start_mark.line + 1 if event.start_mark is not None else None
                raise CrewDefinitionError(
                    f"{source} is nested deeper than {MAX_NESTING} levels", line=line
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def load_file(path: str | Path) -> CrewDefinition:
    """The crew defined in a ``.yaml``/``.yml``/``.json`` file."""
    where = Path(path)
    try:
        text = where.read_text(encoding="utf-8")
    except OSError as exc:
        raise CrewDefinitionError(f"cannot read {where}: {exc.strerror or exc}") from exc
    return parse_text(text, where.name)


def definition_of(value: Any) -> CrewDefinition:
    """A definition given as an object, a mapping, YAML/JSON text, or a path to a file."""
    if isinstance(value, CrewDefinition):
        return checked(value)
    if isinstance(value, dict):
        return checked(value)
    if isinstance(value, Path):
        return load_file(value)
    if isinstance(value, str):
        looks_like_path = "\n" not in value and value.endswith((".yaml", ".yml", ".json"))
        return load_file(value) if looks_like_path else parse_text(value)
    raise CrewDefinitionError(
        f"a crew definition is a mapping, YAML or JSON text, or a file, not {type(value).__name__}"
    )


def line_of(node: yaml.Node, field: str) -> int | None:
    """The 1-based line of ``field`` (``tasks[2].agent``), or of the nearest part that exists."""
    line: int = node.start_mark.line + 1
    for name, index in _INDEX.findall(field):
        found: yaml.Node | None = None
        if name and isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if getattr(key, "value", None) == name:
                    found, line = value, int(key.start_mark.line) + 1
        elif index and isinstance(node, yaml.SequenceNode) and int(index) < len(node.value):
            found = node.value[int(index)]
            line = int(found.start_mark.line) + 1
        if found is None:
            return line
        node = found
    return line
