"""The tools the MCP server offers: neta's own notebook, kernel and file tools, as registered.

Each is the registry's tool (so its checks, its events and its refusals are the ones a neta run
gets); a notebook or kernel tool takes one more argument, ``notebook``: the path of the notebook
it works on, bound on first use. ``list_notebooks`` is the server's own.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Literal

from ..tools import Tool, ToolRegistry

Reach = Literal["notebook", "kernel", "root"]

OFFERED: dict[str, Reach] = {
    "read_notebook": "notebook",
    "insert_cell": "notebook",
    "edit_cell": "notebook",
    "delete_cell": "notebook",
    "move_cell": "notebook",
    "run_cell": "notebook",
    "list_variables": "kernel",
    "inspect_variable": "kernel",
    "python": "kernel",
    "read_file": "root",
    "list_files": "root",
}
"""Registry tools offered, and what each works on."""

KERNEL_NOTEBOOK_TOOLS = frozenset({"run_cell"})
"""Notebook tools that need the notebook's kernel too."""
LIST_NOTEBOOKS = "list_notebooks"
NOTEBOOK_ARGUMENT = "notebook"
NOT_OFFERED_ARGUMENTS = frozenset({"background"})
"""Arguments of registry tools that suspend a run: an MCP call waits for its result instead."""

_NOTEBOOK_PROPERTY = {
    "type": "string",
    "description": "the notebook's path under the server root (e.g. 'analysis/sales.ipynb'); "
    "its kernel is the one the notebook has open, started if it has none",
}


@dataclass(frozen=True, slots=True)
class Offered:
    """One tool as the MCP server offers it."""

    name: str
    description: str
    input_schema: dict[str, Any]
    readonly: bool


def offered(registry: ToolRegistry) -> list[Offered]:
    """The tools the registry has, as offered over MCP, ``list_notebooks`` first."""
    tools = [
        Offered(
            LIST_NOTEBOOKS,
            "List the notebooks open on the server and their kernels (id, name, state).",
            {"type": "object", "properties": {}, "additionalProperties": False},
            readonly=True,
        )
    ]
    for name, reach in OFFERED.items():
        found = registry.get(name)
        if found is not None:
            tools.append(_offered(found, reach))
    return tools


def _offered(tool: Tool, reach: Reach) -> Offered:
    schema = copy.deepcopy(tool.definition.parameters)
    properties: dict[str, Any] = schema.setdefault("properties", {})
    for hidden in NOT_OFFERED_ARGUMENTS:
        properties.pop(hidden, None)
    description = tool.description
    if reach != "root":
        schema["properties"] = {NOTEBOOK_ARGUMENT: _NOTEBOOK_PROPERTY, **properties}
        schema["required"] = [NOTEBOOK_ARGUMENT, *schema.get("required", [])]
    if reach == "kernel":
        description += "\n\nIt works in the kernel of the notebook named by `notebook`."
    return Offered(tool.name, description, schema, tool.readonly)


def reach_of(name: str) -> Reach | None:
    """What the registry tool ``name`` works on (``None``: not offered)."""
    return OFFERED.get(name)
