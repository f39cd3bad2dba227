"""The client: run API calls as methods, and following a run across broken connections."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..runtime.actions import action_named
from ..runtime.queries import query_named
from ..runtime.requests import (
    AttachmentRef,
    CompactRequest,
    ImportRequest,
    InputRequest,
    LeafRequest,
    RequestRef,
    ResumeRequest,
    RunRequest,
    ThinkingLevelRequest,
)
from ._errors import ClientError, InvalidAnswer, StreamInterrupted, StreamLost, TransportError
from ._transport import Call, Received, Transport

RECONNECTS = 8
"""Connections in a row that may fail to bring a new event before following gives up."""


@dataclass(frozen=True, slots=True)
class Started:
    """A run the run API created."""

    request_id: str
    session_id: str
    status: str


def _body(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


def _post(action: str, request: BaseModel) -> Call:
    """The call of the run API's action ``action`` (:data:`~..runtime.actions.ACTIONS`)."""
    return Call("POST", action_named(action).route, _body(request))


def _field(answer: dict[str, Any], name: str) -> str:
    value = answer.get(name)
    if not isinstance(value, str):
        raise InvalidAnswer(f"the run API's answer has no {name}")
    return value


def attachment_sources(items: Sequence[str | Path]) -> tuple[list[AttachmentRef], list[Path]]:
    """The URLs (the server downloads them) and the local files (uploaded) among ``items``.

    ``ValueError`` names a file that does not exist.
    """
    urls, files = [], []
    for item in items:
        text = str(item).strip()
        if text.startswith(("http://", "https://")):
            urls.append(AttachmentRef(url=text))
            continue
        path = Path(text).expanduser()
        if not path.is_file():
            raise ValueError(f"cannot attach {text}: no such file")
        files.append(path.resolve())
    return urls, files


def _upload(path: Path) -> Call:
    try:
        content = Path(path).read_bytes()
    except OSError as exc:
        raise ClientError(
            f"cannot attach {path}: {exc.strerror or exc}", code="ATTACHMENT_UNREADABLE"
        ) from exc
    return Call("POST", "agent/attachment/upload", file=(Path(path).name, content))


def _attaching(request: RunRequest, uploads: list[dict[str, Any]]) -> RunRequest:
    """The request with the uploaded files among its attachments."""
    if not uploads:
        return request
    refs = [AttachmentRef(attachment_id=_field(u, "attachmentId")) for u in uploads]
    return request.model_copy(update={"attachments": [*(request.attachments or []), *refs]})


def _started(answer: dict[str, Any]) -> Started:
    return Started(
        _field(answer, "requestId"), _field(answer, "sessionId"), _field(answer, "status")
    )


class RunClient:
    """Start, steer, follow and look up runs, over a :class:`Transport`.

    Following is where the client earns its keep: :meth:`follow` reconnects after the last event
    it delivered, drops events it already delivered, treats a gap in the seqs as a broken
    connection, and gives up (:class:`StreamLost`) only after ``reconnects`` tries in a row
    bring nothing new, waiting ``retry_delay`` doubling up to ``max_delay`` between them.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        reconnects: int = RECONNECTS,
        retry_delay: float = 0.25,
        max_delay: float = 5.0,
    ) -> None:
        self.transport = transport
        self.reconnects = reconnects
        self.retry_delay = retry_delay
        self.max_delay = max_delay

    # --- actions

    async def start(self, request: RunRequest, files: Sequence[Path] = ()) -> Started:
        """Create a run and start it; ``files`` are uploaded first and attached to it."""
        uploads = [await self.upload(path) for path in files]
        call = _post("start", _attaching(request, uploads))
        return _started(await self.transport.send(call))

    def start_blocking(self, request: RunRequest, files: Sequence[Path] = ()) -> Started:
        """The same without the event loop (only where the run API is elsewhere: HTTP)."""
        uploads = [self.transport.send_blocking(_upload(path)) for path in files]
        call = _post("start", _attaching(request, uploads))
        return _started(self.transport.send_blocking(call))

    async def upload(self, path: Path) -> dict[str, Any]:
        """Upload a local file for a later run to attach; the attachment (``attachmentId``, …)."""
        return await self.transport.send(_upload(path))

    async def resume(
        self,
        request_id: str,
        *,
        approved: bool | None = None,
        ask_id: str | None = None,
        always: bool = False,
        answer: str | None = None,
        digest: str | None = None,
    ) -> str:
        """Continue a suspended run with the decision on its pending ask; its status.

        ``digest``: the permission ask's, as it was shown (a decision on anything else is
        refused with ``ASK_CHANGED``).
        """
        request = ResumeRequest(
            request_id=request_id,
            approved=approved,
            ask_id=ask_id,
            always=always,
            answer=answer,
            digest=digest,
        )
        return await self._act("resume", request)

    async def retry(self, request_id: str) -> str:
        """Continue a recoverable failure from its last completed step; the run's status."""
        return await self._act("retry", RequestRef(request_id=request_id))

    async def terminate(self, request_id: str) -> str:
        """Cancel a running or suspended run; its status."""
        return await self._act("terminate", RequestRef(request_id=request_id))

    async def suspend(self, request_id: str) -> str:
        """Pause a running run at its next step boundary (resume continues it); its status."""
        return await self._act("suspend", RequestRef(request_id=request_id))

    async def add_input(self, request_id: str, content: str) -> str:
        """Queue input for the run's next step; the input's id."""
        request = InputRequest(request_id=request_id, content=content)
        return _field(await self.transport.send(_post("input", request)), "inputId")

    async def compact(
        self, session_id: str, *, instructions: str | None = None, model: str | None = None
    ) -> Started:
        """Summarise a session's older turns now (a short run whose stream shows it)."""
        request = CompactRequest(session_id=session_id, instructions=instructions, model=model)
        return _started(await self.transport.send(_post("compact", request)))

    async def import_run(self, request: ImportRequest) -> Started:
        """Register a run from history (its prompt, answer and tool calls), without a stream."""
        return _started(await self.transport.send(_post("import", request)))

    async def switch_leaf(self, session_id: str, leaf_entry_id: str | None) -> dict[str, Any]:
        """Continue a session from another entry of its tree; the tree as :meth:`tree` reads it."""
        request = LeafRequest(session_id=session_id, leaf_entry_id=leaf_entry_id)
        return await self.transport.send(_post("leaf", request))

    async def set_thinking_level(self, session_id: str, level: str | None) -> None:
        """How hard the model thinks in the session's next runs (``None``: the default)."""
        request = ThinkingLevelRequest.model_validate({"sessionId": session_id, "level": level})
        await self.transport.send(_post("thinking_level", request))

    async def _act(self, action: str, request: RequestRef) -> str:
        return _field(await self.transport.send(_post(action, request)), "status")

    # --- following

    async def follow(self, request_id: str, after: int = -1) -> AsyncGenerator[Received, None]:
        """Events after ``after`` up to and including the next terminal event, each once.

        Yields nothing when the run is at rest (ended, or waiting for an answer) and nothing
        new has come since ``after``.
        """
        failures = 0
        while True:
            try:
                async with contextlib.aclosing(self.transport.stream(request_id, after)) as stream:
                    async for item in stream:
                        if item.seq <= after:
                            continue  # delivered before this connection
                        if item.seq != after + 1:
                            raise StreamInterrupted(f"events after {after} were skipped")
                        after, failures = item.seq, 0
                        yield item
                        if item.terminal:
                            return
                return
            except TransportError as exc:
                failures += 1
                if failures > self.reconnects:
                    raise StreamLost(
                        f"lost the stream of run {request_id} ({exc.message})"
                    ) from exc
            await asyncio.sleep(min(self.retry_delay * 2 ** (failures - 1), self.max_delay))

    # --- queries (answered at once, without the event loop)

    def status(self, request_id: str) -> dict[str, Any]:
        """The run's summary (``status``, ``model``, ``step``, ``usage``, ``pendingAsk``, …)."""
        return self._query("status", requestId=request_id)

    def runs(self, session_id: str | None = None) -> list[dict[str, Any]]:
        """Run summaries, newest first; only the session's when given."""
        params = {"sessionId": session_id} if session_id else {}
        return list(self._query("runs", **params).get("runs", []))

    def sessions(self) -> list[dict[str, Any]]:
        """Sessions, newest first (``sessionId``, ``name``, tokens)."""
        return list(self._query("sessions").get("sessions", []))

    def tree(self, session_id: str) -> dict[str, Any]:
        """The session's whole tree (``entries``) and its active path (``activePath``)."""
        return self._query("tree", sessionId=session_id)

    def models(self) -> dict[str, Any]:
        """``{"default": name, "models": [names]}``."""
        answer = self._query("models")
        return {"default": answer.get("default"), "models": list(answer.get("models", []))}

    def mcp(self) -> dict[str, Any]:
        """``{"servers": [{name, transport, state, tools, error?}], "problems": [text]}``."""
        answer = self._query("mcp")
        return {
            "servers": list(answer.get("servers", [])),
            "problems": list(answer.get("problems", [])),
        }

    def revert_edit(
        self, *, edit_id: str | None = None, notebook_path: str | None = None
    ) -> dict[str, Any]:
        """Revert a notebook edit (or the last one of the latest run from a notebook)."""
        body = {"editId": edit_id} if edit_id is not None else {"notebookPath": notebook_path}
        answer = self.transport.send_blocking(Call("POST", "notebook/revert", body=body))
        edit: dict[str, Any] = answer.get("edit", {})
        return edit

    def _query(self, name: str, **params: str) -> dict[str, Any]:
        """The run API's query ``name`` (:data:`~..runtime.queries.QUERIES`)."""
        route = query_named(name).route
        return self.transport.send_blocking(Call("GET", route, params=params))

    async def aclose(self) -> None:
        """Release the transport's connections."""
        await self.transport.aclose()
