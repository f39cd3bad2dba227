"""The host of a kernel's runs: the one small interface both hosts implement.

``ServerHost`` (``server_host.py``) creates runs on the Jupyter server over REST and follows them
over SSE; ``EmbeddedHost`` (``embedded.py``) owns a runtime on the kernel's own event loop.
Everything else in ``kernel/`` (handles, magics, ``ask``) talks to a :class:`Host` only.

Exceptions (who raises → who catches)::

    HostError    raised by hosts when the run API refuses an action, caught by the magics
                 (shown to the user) and by run handles (shown in the widget)
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal, Protocol

Mode = Literal["server", "embedded"]
PRINCIPAL = "owner"
"""Embedded runs belong to the kernel's user; on a server the server decides."""


class HostError(Exception):
    """The run API refused an action; ``code`` is its error code."""

    def __init__(self, message: str, *, code: str = "HOST_ERROR") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


@dataclass(frozen=True, slots=True)
class RunOptions:
    """What a new run is started with."""

    prompt: str
    session: str
    """Session name; runs of one session share the conversation."""
    model: str | None = None
    max_steps: int | None = None
    approve: str = "ask"
    """``ask`` (prompt in the widget), ``auto`` or ``deny`` (headless runs)."""
    tools: list[str] | None = None
    """Tool names to offer; None offers all."""
    notebook_path: str | None = None
    """The notebook, when known (its folder's AGENTS.md joins the context)."""
    thinking: str | None = None
    """Thinking level for this run; None keeps the session's (or the endpoint's default)."""
    variables: list[str] | None = None
    """The kernel's variables when the prompt ran, one summary line each (``%neta`` takes them)."""


@dataclass(frozen=True, slots=True)
class Started:
    """A run the host created."""

    request_id: str
    session_id: str


class Host(Protocol):
    """Start, steer and follow runs; query sessions and history."""

    @property
    def mode(self) -> Mode:
        """``server`` or ``embedded``."""
        ...

    async def start(self, options: RunOptions) -> Started:
        """Create a run and start it."""
        ...

    async def resume(
        self,
        request_id: str,
        *,
        approved: bool | None = None,
        ask_id: str | None = None,
        always: bool = False,
        answer: str | None = None,
    ) -> None:
        """Continue a suspended run with the decision on its pending ask."""
        ...

    async def terminate(self, request_id: str) -> None:
        """Stop a running or suspended run."""
        ...

    async def retry(self, request_id: str) -> None:
        """Continue a recoverable failure from its last completed step."""
        ...

    async def add_input(self, request_id: str, content: str) -> str:
        """Queue input for the run's next step; returns the input id."""
        ...

    async def compact(self, session: str, instructions: str | None = None) -> Started:
        """Summarise the named session's older turns now (a short run that shows it)."""
        ...

    def follow(self, request_id: str, after_seq: int = -1) -> AsyncIterator[dict[str, Any]]:
        """Envelopes after ``after_seq`` up to the next terminal event (one stream segment).

        Yields nothing when the run is at rest and nothing new will come.
        """
        ...

    def status(self, request_id: str) -> dict[str, Any]:
        """The run's summary (``requestId``, ``status``, ``model``, ``step``, ``usage``, …)."""
        ...

    def runs(self, session: str | None = None) -> list[dict[str, Any]]:
        """Run summaries, newest first; only the named session's when given."""
        ...

    def sessions(self) -> list[dict[str, Any]]:
        """Sessions, newest first (``sessionId``, ``name``, tokens)."""
        ...

    def history(self, session: str) -> list[dict[str, Any]]:
        """The session's conversation: entries (``role``, ``message``) from the root to the leaf."""
        ...

    def models(self) -> dict[str, Any]:
        """``{"default": name, "models": [names]}``."""
        ...

    def describe(self) -> dict[str, Any]:
        """What ``%neta config`` shows."""
        ...

    def image_source(self, virtual_path: str) -> str:
        """Where the widget can load an attachment from (a data URL when embedded)."""
        ...

    async def aclose(self) -> None:
        """Release connections (the kernel is shutting down)."""
        ...
