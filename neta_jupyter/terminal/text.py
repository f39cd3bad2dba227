"""Text from the run, made safe and short for a terminal.

Everything a run shows comes from models, files and tools, so it is hostile: an escape sequence
in it could retitle the terminal, move the cursor, recolour or hide what follows. :func:`clean`
removes whole sequences (CSI, OSC, DCS and other ESC sequences, their 8-bit forms) and every
other control character but newline and tab, before anything reaches the screen.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..events import PermissionAskData, Usage

_SEQUENCES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"  # CSI: cursor moves, colours, erasing
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC, DCS…
    r"|\x1b[ -/]*[0-~]"  # the other escape sequences (charset switches, resets, …)
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
PREVIEW_WIDTH = 160
CUT_OFF_NOTE = "↻ the reply was cut off and came out differently when asked again; in full:"
"""Shown before a segment that replaces a cut-off one (what was printed cannot be taken back)."""


def clean(text: str) -> str:
    """``text`` without escape sequences and control characters other than newline and tab."""
    return _CONTROL.sub("", _SEQUENCES.sub("", text))


def one_line(text: str, width: int = PREVIEW_WIDTH) -> str:
    """``text`` on one line, cut to ``width`` characters."""
    flat = " ".join(clean(text).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def compact_arguments(arguments: str | None) -> str:
    """Tool arguments as compact one-line JSON (as received when they are not JSON)."""
    if not arguments:
        return "{}"
    try:
        text = json.dumps(json.loads(arguments), ensure_ascii=False, separators=(", ", ": "))
    except ValueError:
        text = arguments
    return one_line(text)


@dataclass(frozen=True, slots=True)
class ToolLabel:
    """A tool as people read its name: an MCP server's tool by its own name, and its server.

    The events say which tools are an MCP server's (``mcpServer``, ``mcpTool``): a name of
    neta's own tool may hold ``__`` too, and an MCP tool's name may be cut to fit a model.
    """

    name: str = "tool"
    server: str | None = None
    """The MCP server offering it; ``None`` for neta's own tools."""
    tool: str | None = None
    """Its own name on that server."""

    def seen(
        self, name: str | None, server: str | None = None, tool: str | None = None
    ) -> ToolLabel:
        """The label once an event names the tool (and, for an MCP tool, its server)."""
        if server:
            return ToolLabel(name or self.name, server, tool)
        return ToolLabel(name or self.name, self.server, self.tool)

    def words(self) -> str:
        """``run_query from warehouse`` for an MCP server's tool, else the tool's name."""
        if self.server is None:
            return clean(self.name)
        return f"{clean(self.tool or self.name)} from {clean(self.server)}"

    def ask_words(self) -> str:
        """The name in a permission question, saying which MCP server would run it."""
        if self.server is None:
            return clean(self.name)
        return f"{clean(self.tool or self.name)} from the MCP server {clean(self.server)}"


def asked_label(ask: PermissionAskData) -> ToolLabel:
    """The tool a permission ask is about."""
    return ToolLabel().seen(ask.tool_name, ask.mcp_server, ask.mcp_tool)


def duration(ms: int | None) -> str:
    """`` (340 ms)`` or `` (1.5 s)``; empty when unknown."""
    if ms is None:
        return ""
    return f" ({ms} ms)" if ms < 1000 else f" ({ms / 1000:.1f} s)"


def usage_text(usage: Usage | None) -> str:
    """`` · tokens: 10 in, 5 out, 15 total``; empty without usage."""
    if usage is None or not usage.total_tokens:
        return ""
    cached = f", {usage.cached_tokens} cached" if usage.cached_tokens else ""
    return (
        f" · tokens: {usage.prompt_tokens} in{cached}, {usage.completion_tokens} out,"
        f" {usage.total_tokens} total"
    )


PHASE_TEXT = {
    "building_context": "building the context",
    "budgeting": "checking the token budget",
    "calling_model": "waiting for the model",
    "running_tools": "running tools",
    "compacting": "compacting the conversation",
    "finishing": "finishing",
}
"""What the status line says of each phase of the loop (PHASE_CHANGED); others are not shown."""


def phase_text(phase: str | None, tool_names: list[str] | None = None) -> str | None:
    """The loop's phase in words, with the tools about to run; None for one not known here."""
    text = PHASE_TEXT.get(phase or "")
    if text is None or phase != "running_tools" or not tool_names:
        return text
    return f"{text}: {', '.join(clean(n) for n in dict.fromkeys(tool_names))}"


def edit_words(payload: dict[str, object], message: str | None) -> str:
    """What a notebook edit changed: the server's words, else its kind, cell and notebook."""
    if message:
        return message
    where = f" in {payload['path']}" if payload.get("path") else ""
    return f"{payload.get('kind', 'edit')} of cell {payload.get('cellId', '?')}{where}"


STALE_WORDS = "the cell changed since the agent read it: this edit will be refused"


@dataclass(frozen=True)
class Preview:
    """What a notebook tool asking for approval would do (``PERMISSION_ASK.preview``)."""

    kind: str
    """``diff`` (a cell change) or ``code`` (a cell to run)."""
    text: str
    stale: bool


def read_preview(preview: dict[str, Any] | None) -> Preview | None:
    """The preview of an ask, or None when there is none this client knows."""
    if not preview or preview.get("kind") not in ("diff", "code"):
        return None
    text = preview.get("text")
    if not isinstance(text, str):
        return None
    return Preview(str(preview["kind"]), clean(text), preview.get("stale") is True)
