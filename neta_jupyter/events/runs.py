"""What the run API says about a run (its status, its pending ask): wire models, not events.

They are built from the runtime's own record of the run and never are that record: the runtime
may rename what it keeps without any client noticing. As with events, fields are only added.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict

from .accounting import Usage
from .wire import _Wire

AskKind = Literal["permission", "clarify"]
RunStatusName = Literal["running", "suspended", "completed", "failed"]
OriginKind = Literal["cell", "terminal", "panel", "api", "mcp", "crew", "subagent"]
StartedFrom = Literal["cell", "terminal", "panel"]
"""neta's own clients, which say so when they start a run (``origin`` of the request)."""


class _Documented(_Wire):
    """Field docstrings become the descriptions of the API document."""

    model_config = ConfigDict(use_attribute_docstrings=True)


class PendingAsk(_Documented):
    """What a suspended run waits for: a decision on a tool call, or an answer to a question."""

    kind: AskKind
    """``permission`` (answer with ``approved``) or ``clarify`` (answer with ``answer``)."""
    ask_id: str
    """Pass it back to ``resumeTask`` as ``askId`` (for a question: the ``clarifyId``)."""
    tool_call_id: str
    """The tool call that waits."""
    tool_name: str
    """Its tool."""


class RunOrigin(_Documented):
    """Where a run came from: which client started it, and the notebook it is bound to."""

    kind: OriginKind
    """``cell`` (``%neta`` or ``ask`` in a notebook's kernel), ``terminal`` (``neta-jupyter
    run``), ``panel`` (the side panel), ``api`` (a client that did not say), ``mcp`` (an MCP
    client), ``crew`` (a task of a crew) or ``subagent`` (delegated by another run)."""
    notebook_path: str | None = None
    """The notebook the run is bound to, when it is."""
    client: str | None = None
    """The client's own name, when it gave one."""


class RunSummary(_Documented):
    """A run as ``GET …/run/status`` and ``GET …/runs`` describe it."""

    request_id: str
    """The run."""
    session_id: str
    """Its session."""
    status: RunStatusName
    """``running``, ``suspended``, ``completed`` or ``failed``."""
    model: str
    """The model it runs on."""
    prompt: str
    """The user's prompt."""
    created: float
    """When it started (seconds since the epoch)."""
    imported: bool = False
    """A history run registered without a stream (its stream answers 409)."""
    last_seq: int
    """Seq of its last event (-1 before the first)."""
    events_expired: bool = False
    """Its events were deleted once kept long enough after it ended (its stream answers 410);
    its messages remain in the session tree."""
    step: int
    """Model replies so far."""
    recoverable: bool
    """A failure ``retryTask`` can continue."""
    pending_ask: PendingAsk | None = None
    """What it waits for while suspended on a permission ask or a question."""
    suspend_deadline: float | None = None
    """While it waits for a person (an ask, a question, a pause): when it is stopped with
    USER_NO_RESPONSE if nobody answers (seconds since the epoch)."""
    usage: Usage
    """Its token totals (a run that delegated counts its sub-agents' tokens in)."""
    parent_request_id: str | None = None
    """The run that started it as a sub-agent; absent for a run a user started."""
    origin: RunOrigin = RunOrigin(kind="api")
    """Where it came from."""


class RunList(_Documented):
    """``GET …/runs``: the caller's runs, newest first."""

    runs: list[RunSummary]
    """One summary per run."""
