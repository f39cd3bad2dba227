"""Bodies of a tool call's lifecycle and of what it asks the user (a permission, a question)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field

from .wire import EventBody


class ToolData(EventBody):
    """One tool call's lifecycle, keyed by ``toolCallId``."""

    type: Literal["tool"] = "tool"
    event_types: ClassVar[Mapping[str, str]] = {
        "TOOL_CALL_GENERATING": "The model is writing a tool call.",
        "TOOL_START": "A tool call is about to run.",
        "TOOL_RUNNING": "A tool call is running.",
        "TOOL_COMPLETED": "A tool call ended with its result.",
        "TOOL_FAILED": "A tool call failed, was refused or denied.",
    }
    tool_call_id: str
    """Shared by every event of one call."""
    tool_name: str | None = None
    """Tool name (first GENERATING frame and later events)."""
    title: str | None = None
    """Progress title (TOOL_RUNNING)."""
    arguments: str | None = None
    """Argument JSON: a fragment on GENERATING, the whole object on START."""
    output: str | None = None
    """Result text (TOOL_COMPLETED), truncated past the event size limit."""
    error_message: str | None = None
    """Why it failed (TOOL_FAILED)."""
    duration_ms: int | None = None
    """Execution time (COMPLETED / FAILED)."""
    truncated: bool | None = None
    """True when ``output`` was cut; ``outputRef`` points at the whole."""
    output_ref: str | None = None
    """Virtual path of the full output when truncated."""
    images: list[str] | None = None
    """Virtual paths of images the tool produced (download via the attachment API)."""
    mcp_server: str | None = None
    """The MCP server offering the tool (START); absent for neta's own tools."""
    mcp_tool: str | None = None
    """The tool's own name on that server (START): ``toolName`` may be cut to fit a model."""


class ToolSideData(EventBody):
    """Side-channel structured information during a tool's execution."""

    type: Literal["tool_side"] = "tool_side"
    event_types: ClassVar[Mapping[str, str]] = {
        "TOOL_EVENT": "Something a running tool did (an output, a cell changed).",
    }
    tool_call_id: str
    """The call it belongs to."""
    tool_name: str | None = None
    """Tool name."""
    category: str
    """``auth_required``, ``tool_stream_data``, … (unknown ones are ignored)."""
    payload: dict[str, Any] | None = None
    """Category-specific data."""
    user_message: str | None = None
    """A friendly message to show."""


class PermissionAskData(EventBody):
    """A tool call waits for the user's decision; ``MESSAGE_SUSPENDED`` follows."""

    type: Literal["permission_ask"] = "permission_ask"
    event_types: ClassVar[Mapping[str, str]] = {
        "PERMISSION_ASK": "A tool call waits for a person's approval.",
    }
    ask_id: str
    """Pass it back to ``resumeTask``."""
    principal_id: str | None = None
    """The user the run belongs to."""
    tool_name: str
    """Tool to be run."""
    tool_call_id: str
    """Call awaiting the decision."""
    arguments: str
    """Argument JSON that would run."""
    mcp_server: str | None = None
    """The MCP server that would run it; absent for neta's own tools."""
    mcp_tool: str | None = None
    """The tool's own name on that server."""
    rule_description: str | None = None
    """Human description of the rule that matched."""
    rule_pattern: str | None = None
    """The pattern of the rule that matched."""
    preview: dict[str, Any] | None = None
    """What the call would do, for the prompt: ``{"kind": "diff", "text": <unified diff>,
    "cellId"?, "stale"?}`` for a cell change, ``{"kind": "code", "text": <source>, "cellId"}``
    for a cell to run."""
    digest: str | None = None
    """Of what this ask shows: the call and the state it acts on (a cell's whole source). Pass it
    back to ``resumeTask`` with the decision; an approval holds only while the call would still
    do that, otherwise the call is not run and is asked about again."""


class PermissionResolvedData(EventBody):
    """The decision on a permission ask."""

    type: Literal["permission_ask_resolved"] = "permission_ask_resolved"
    event_types: ClassVar[Mapping[str, str]] = {
        "PERMISSION_ASK_RESOLVED": "The approval was decided.",
    }
    ask_id: str
    """The ask decided."""
    approved: bool
    """Whether the call may run."""
    reason: str | None = None
    """Why (e.g. ``user``, ``always_allow``)."""
    resolve_type: str | None = None
    """``once`` or ``always``."""


class ClarifyData(EventBody):
    """The agent asks the user a question; the run suspends until answered."""

    type: Literal["clarify"] = "clarify"
    event_types: ClassVar[Mapping[str, str]] = {
        "CLARIFY_REQUEST": "The model asks the person a question.",
    }
    clarify_id: str
    """Pass it back with the answer."""
    question: str
    """The question."""
    options: list[str] = Field(default_factory=list)
    """Suggested answers."""
    tool_call_id: str | None = None
    """The clarify tool call."""
