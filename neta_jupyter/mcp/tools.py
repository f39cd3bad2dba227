"""An MCP server's tools as neta tools: their names and their schemas."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from ..providers.base import ToolDefinition
from ..tools import Tool
from ..tools.registry import ToolFunction, json_arguments

if TYPE_CHECKING:
    from mcp import types

SEPARATOR = "__"
MAX_NAME = 64
"""The longest tool name the model vendors accept."""
_HASH = 8
"""Hex digits of the hash that ends a name cut to fit."""
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


class _AnyArguments(BaseModel):
    model_config = ConfigDict(extra="allow")


@dataclass(frozen=True, slots=True)
class McpTool(Tool):
    """A tool of an MCP server, offered as ``<server>__<tool>`` with the server's JSON Schema."""

    schema: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def definition(self) -> ToolDefinition:
        """The tool with its server's schema (no pydantic model stands between them)."""
        return ToolDefinition(self.name, self.description, self.schema)

    def parse_arguments(self, arguments: str) -> dict[str, Any]:
        """A JSON object; the server checks it against its schema."""
        return json_arguments(self.name, arguments)


def neta_name(server: str, tool: str) -> str:
    """The name the model sees: ``<server>__<tool>``, with characters models refuse replaced.

    A name past :data:`MAX_NAME` is cut and ends in a short hash of the server's own name for the
    tool: two long names that begin alike stay apart, and a tool keeps its name from one start of
    the server to the next (its permission rules and its past calls go on naming it).
    """
    name = f"{server}{SEPARATOR}{_UNSAFE.sub('_', tool)}"
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(tool.encode()).hexdigest()[:_HASH]
    return f"{name[: MAX_NAME - _HASH - 1]}_{digest}"


def mcp_tool(server: str, remote: types.Tool, run: ToolFunction) -> McpTool:
    """``remote``, a tool of ``server``, as a neta tool calling ``run``."""
    annotations = remote.annotations
    schema = dict(remote.input_schema or {})
    schema.setdefault("type", "object")
    return McpTool(
        name=neta_name(server, remote.name),
        description=remote.description or remote.title or remote.name,
        function=run,
        arguments_model=_AnyArguments,
        readonly=bool(annotations is not None and annotations.read_only_hint),
        schema=schema,
        mcp_server=server,
        mcp_tool=remote.name,
    )
