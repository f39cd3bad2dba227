"""What is generated from the bodies' declarations, and writing it: ``--write`` / ``--check``.

Each body (:class:`~.wire.EventBody`) names the event types that carry it. From those
declarations come, checked in and kept current by a test:

- ``generated.py``: the ``EventType`` enum and the ``EventData`` union (mypy reads them);
- ``js/schema/events.schema.json``: the JSON Schema (the widget's interfaces are made from it);
- ``js/src/catalogue.ts``: every event type and the ``data.type`` it carries, for the widget.

Published names are only ever added: a new event type or body goes after the ones there are.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
import textwrap
from pathlib import Path

from .wire import EventBody

PACKAGE = Path(__file__).resolve().parent
ROOT = PACKAGE.parent.parent
GENERATED = PACKAGE / "generated.py"
SCHEMA = ROOT / "js" / "schema" / "events.schema.json"
CATALOGUE_TS = ROOT / "js" / "src" / "catalogue.ts"
COMMAND = "python -m neta_jupyter.events --write"


def declared_bodies() -> list[type[EventBody]]:
    """Every body of the package that declares event types (each of its modules imported)."""
    for info in pkgutil.iter_modules([str(PACKAGE)]):
        if info.name not in ("__main__", "generated"):
            importlib.import_module(f"{__package__}.{info.name}")
    return list(EventBody.declared)


def _in_published_order(published: list[str], declared: list[str]) -> list[str]:
    """``declared``, with those already published first, in their order: new ones go last."""
    kept = [name for name in published if name in declared]
    return kept + [name for name in declared if name not in kept]


def catalogue() -> dict[str, type[EventBody]]:
    """``{eventType: body}`` in the catalogue's order; an event type declared twice is refused."""
    found: dict[str, type[EventBody]] = {}
    for body in declared_bodies():
        for event_type in body.event_types:
            if event_type in found:
                raise ValueError(f"{event_type} is declared by {found[event_type].__name__} too")
            found[event_type] = body
    from .generated import EventType

    order = _in_published_order([t.value for t in EventType], list(found))
    return {event_type: found[event_type] for event_type in order}


def bodies() -> list[type[EventBody]]:
    """The bodies in the union's order (published first)."""
    from .generated import EventData

    published = [b.__name__ for b in EventData.__origin__.__args__]  # type: ignore[attr-defined]
    by_name = {b.__name__: b for b in declared_bodies()}
    return [by_name[name] for name in _in_published_order(published, list(by_name))]


def member_name(event_type: str) -> str:
    """The enum member of an event type (``crew:task:status`` → ``CREW_TASK_STATUS``)."""
    return re.sub(r"\W", "_", event_type).upper()


def data_type(body: type[EventBody]) -> str:
    """The ``data.type`` a body carries."""
    return str(body.model_fields["type"].default)


def _docstring(text: str, indent: str) -> list[str]:
    lines = textwrap.wrap(text, 96 - len(indent), break_on_hyphens=False)
    lines[0] = '"""' + lines[0]
    lines[-1] += '"""'
    return [indent + line for line in lines]


def render_python() -> str:
    """The text of ``generated.py``."""
    types, union = catalogue(), bodies()
    modules: dict[str, list[str]] = {}
    for body in union:
        modules.setdefault(body.__module__.rsplit(".", 1)[-1], []).append(body.__name__)
    out = [
        '"""The event types and the union of bodies: generated from the bodies\' declarations.',
        "",
        f"Written by ``{COMMAND}`` from each body's ``event_types``",
        "(:class:`~.wire.EventBody`); do not edit.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from enum import StrEnum",
        "from typing import Annotated",
        "",
        "from pydantic import Field",
        "",
    ]
    for module, names in sorted(modules.items()):
        out += [f"from .{module} import (", *(f"    {n}," for n in sorted(names)), ")"]
    out += [
        "",
        "",
        "class EventType(StrEnum):",
        '    """Every ``eventType`` the server emits (DESIGN §3)."""',
    ]
    for event_type, body in types.items():
        text = f"{body.event_types[event_type]} Carries :class:`.{body.__name__}`."
        out += ["", f'    {member_name(event_type)} = "{event_type}"', *_docstring(text, "    ")]
    names = [body.__name__ for body in union]
    out += ["", "", "EventData = Annotated[", f"    {names[0]}"]
    out += [f"    | {name}" for name in names[1:-1]] + [f"    | {names[-1]},"]
    out += ['    Field(discriminator="type"),', "]", '"""An event\'s body, by ``data.type``."""']
    return "\n".join(out) + "\n"


def render_schema() -> str:
    """The text of ``events.schema.json``."""
    from .encoding import catalogue_schema

    return json.dumps(catalogue_schema(), indent=2, sort_keys=True) + "\n"


def render_typescript() -> str:
    """The text of ``catalogue.ts``."""
    types = catalogue()
    listed = "".join(f'  "{t}",\n' for t in types)
    carried = "".join(f'  "{t}": "{data_type(b)}",\n' for t, b in types.items())
    return (
        f"/* Generated from the event bodies of neta_jupyter/events by `{COMMAND}`."
        " Do not edit. */\n\n"
        "/** Every event type, in the catalogue's order. */\n"
        f"export const EVENT_TYPES = [\n{listed}] as const;\n\n"
        "export type EventTypeName = (typeof EVENT_TYPES)[number];\n\n"
        "/** The `data.type` of the body each event type carries. */\n"
        "export const DATA_TYPE_OF: { readonly [T in EventTypeName]: string } = {\n"
        f"{carried}}};\n"
    )


def outputs() -> dict[Path, str]:
    """Every generated file and what it should hold."""
    return {
        GENERATED: render_python(),
        SCHEMA: render_schema(),
        CATALOGUE_TS: render_typescript(),
    }


def stale() -> list[Path]:
    """The generated files that differ from what the declarations give."""
    return [
        path for path, text in outputs().items() if not path.is_file() or path.read_text() != text
    ]


def write() -> list[Path]:
    """Write the generated files that changed; returns them."""
    changed = stale()
    texts = outputs()
    for path in changed:
        path.write_text(texts[path])
    return changed
