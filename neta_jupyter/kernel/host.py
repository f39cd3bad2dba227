"""The host of a kernel's runs: the run-API client, and what depends on where the runs live.

``ServerHost`` (``server_host.py``) reaches the Jupyter server that started this kernel over HTTP
and SSE, with this kernel's id on every run; ``EmbeddedHost`` (``embedded.py``) owns a runtime on
the kernel's own event loop and reaches it in-process. Both are a :class:`Host` over one
:class:`~neta_jupyter.client.RunClient`; everything else in ``kernel/`` (handles, magics,
``ask``) talks to a :class:`Host` only.

Errors are the client's (their tree is drawn in :mod:`neta_jupyter.client._errors`)::

    HostError (= ClientError)   raised by hosts when the run API refuses an action or cannot be
                                reached, caught by the magics (shown to the user) and by run
                                handles (shown in the widget); ``TransportError`` among them
                                means "try again later"
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Literal

from ..client import ClientError, RunClient, RunRequest, Started

Mode = Literal["server", "embedded"]
PRINCIPAL = "owner"
"""Embedded runs belong to the kernel's user; on a server the server decides."""

HostError = ClientError
"""What a host raises: the kernel's name for the client's errors."""

__all__ = ["PRINCIPAL", "Host", "HostError", "Mode"]


class Host:
    """Start, steer and follow runs; query sessions and history (sessions go by name here)."""

    mode: Mode

    def __init__(self, client: RunClient) -> None:
        self.client = client

    # --- actions

    async def start(self, request: RunRequest, files: Sequence[Path] = ()) -> Started:
        """Create a run and start it; ``files`` (on this machine) are uploaded and attached."""
        return await self.client.start(request, files)

    def start_now(self, request: RunRequest, files: Sequence[Path] = ()) -> Started | None:
        """Create the run before the cell that asks for it returns; None where it cannot be.

        A later cell may keep the kernel busy for minutes; a run on a server must not wait for
        it, and the widget needs the run's id to follow it there meanwhile. An embedded run is
        created on the kernel's loop, which is this cell's: it starts when the cell ends.
        """
        return None

    async def resume(
        self,
        request_id: str,
        *,
        approved: bool | None = None,
        ask_id: str | None = None,
        always: bool = False,
        answer: str | None = None,
        digest: str | None = None,
    ) -> None:
        """Continue a suspended run with the decision on its pending ask (as it was shown)."""
        await self.client.resume(
            request_id,
            approved=approved,
            ask_id=ask_id,
            always=always,
            answer=answer,
            digest=digest,
        )

    async def terminate(self, request_id: str) -> None:
        """Stop a running or suspended run."""
        await self.client.terminate(request_id)

    async def suspend(self, request_id: str) -> None:
        """Pause a running run at its next step boundary (resume continues it)."""
        await self.client.suspend(request_id)

    async def retry(self, request_id: str) -> None:
        """Continue a recoverable failure from its last completed step."""
        await self.client.retry(request_id)

    async def add_input(self, request_id: str, content: str) -> str:
        """Queue input for the run's next step; returns the input id."""
        return await self.client.add_input(request_id, content)

    async def compact(self, session: str, instructions: str | None = None) -> Started:
        """Summarise the named session's older turns now (a short run that shows it)."""
        session_id = self._session_id(session)
        if session_id is None:
            raise HostError(f"no conversation named {session!r} yet", code="SESSION_NOT_FOUND")
        return await self.client.compact(session_id, instructions=instructions)

    async def follow(self, request_id: str, after_seq: int = -1) -> AsyncIterator[dict[str, Any]]:
        """Envelopes after ``after_seq`` up to the next terminal event (one stream segment).

        Yields nothing when the run is at rest and nothing new will come.
        """
        async for item in self.client.follow(request_id, after_seq):
            yield item.envelope()

    # --- queries

    def status(self, request_id: str) -> dict[str, Any]:
        """The run's summary (``requestId``, ``status``, ``model``, ``step``, ``usage``, …)."""
        return self.client.status(request_id)

    def runs(self, session: str | None = None) -> list[dict[str, Any]]:
        """Run summaries, newest first; only the named session's when given."""
        if session is None:
            return self.client.runs()
        session_id = self._session_id(session)
        return [] if session_id is None else self.client.runs(session_id)

    def sessions(self) -> list[dict[str, Any]]:
        """Sessions, newest first (``sessionId``, ``name``, tokens)."""
        return self.client.sessions()

    def history(self, session: str) -> list[dict[str, Any]]:
        """The session's conversation: entries (``role``, ``message``) from the root to the leaf."""
        session_id = self._session_id(session)
        if session_id is None:
            return []
        tree = self.client.tree(session_id)
        by_id = {e["entryId"]: e for e in tree.get("entries", [])}
        return [by_id[i] for i in tree.get("activePath", []) if i in by_id]

    def models(self) -> dict[str, Any]:
        """``{"default": name, "models": [names]}``."""
        return self.client.models()

    def undo(self, notebook_path: str) -> dict[str, Any]:
        """Revert the last notebook edit of the latest run from ``notebook_path``; the edit."""
        raise HostError(
            "runs change notebooks only on a Jupyter server, so there is nothing to undo here",
            code="NOT_AVAILABLE",
        )

    def mcp(self) -> dict[str, Any]:
        """The MCP servers, their state and their tools (``GET /neta/api/mcp``)."""
        return self.client.mcp()

    def _session_id(self, name: str) -> str | None:
        found = [s for s in self.sessions() if s.get("name") == name]
        return str(found[0]["sessionId"]) if found else None

    def describe(self) -> dict[str, Any]:
        """What ``%neta config`` shows."""
        return {"mode": self.mode}

    def image_source(self, virtual_path: str) -> str:
        """Where the widget can load an attachment from."""
        return virtual_path

    async def aclose(self) -> None:
        """Release connections (the kernel is shutting down)."""
        await self.client.aclose()
