"""Crews through the run API: start one, follow its log, control it — on a server or in-process.

:class:`HttpCrews` talks to a Jupyter server (REST, and SSE for the log); :class:`InProcessCrews`
to the crews of a runtime in this process. Both are a :class:`CrewSide`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any, Protocol

import httpx
from httpx_sse import aconnect_sse

from ..crews import CrewDefinition
from ..crews.log import ENDED_CREW, RUN_STATUS
from ..crews.manager import Crews
from ._errors import ClientError

Envelope = dict[str, Any]


def ends(envelope: Envelope) -> bool:
    """Whether the event is the crew's final status."""
    data = envelope.get("data") or {}
    return envelope.get("eventType") == RUN_STATUS and data.get("status") in ENDED_CREW


class CrewSide(Protocol):
    """Where the crew runs: start it, follow its log, control it."""

    async def start(self, definition: CrewDefinition, inputs: dict[str, str], approve: str) -> str:
        """The new crew's requestId."""
        ...

    def follow(self, request_id: str, after: int) -> AsyncIterator[Envelope]:
        """The crew's events after seq ``after``, live, until it ends."""
        ...

    async def control(self, request_id: str, action: str, **fields: Any) -> dict[str, Any]:
        """Apply a control; the crew's status after it."""
        ...

    async def aclose(self) -> None:
        """Let go (an embedded crew still going is paused, resumable)."""
        ...


class InProcessCrews:
    """The crews of a runtime in this process, for one principal."""

    def __init__(self, crews: Crews, principal: str) -> None:
        self.crews, self.principal = crews, principal

    async def start(self, definition: CrewDefinition, inputs: dict[str, str], approve: str) -> str:
        """Start it here."""
        state = await self.crews.start(self.principal, definition, inputs, approve=approve)
        return state.request_id

    async def follow(self, request_id: str, after: int) -> AsyncIterator[Envelope]:
        """From the event log, until the crew ends."""
        ticks = self.crews.rt.follow(request_id, after)
        try:
            async for batch in ticks:
                for _seq, _kind, payload in batch:
                    envelope = json.loads(payload)
                    yield envelope
                    if ends(envelope):
                        return
        finally:
            await ticks.aclose()  # type: ignore[attr-defined]

    async def control(self, request_id: str, action: str, **fields: Any) -> dict[str, Any]:
        """Through the crews of this process."""
        return await self.crews.control(self.principal, request_id, action, **fields)  # type: ignore[arg-type]

    async def aclose(self) -> None:
        """Nothing to let go of: the runtime is its owner's."""


class HttpCrews:
    """The crews of a Jupyter server at ``base`` (its base_url included)."""

    def __init__(self, base: str, headers: dict[str, str], *, trust_env: bool = False) -> None:
        base = base if base.endswith("/") else base + "/"
        self.http = httpx.AsyncClient(
            base_url=base,
            headers=headers,
            timeout=httpx.Timeout(30.0, read=60.0),
            trust_env=trust_env,
        )

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            response = await self.http.post(path, json=body)
        except httpx.HTTPError as exc:
            raise ClientError(f"cannot reach the server: {exc}", code="UNREACHABLE") from exc
        reply = (
            response.json()
            if response.headers.get("content-type", "").startswith("application/json")
            else {}
        )
        if response.status_code != 200:
            message = str(reply.get("message") or response.text)
            raise ClientError(message, code=str(reply.get("errCode") or "REFUSED"))
        return dict(reply)

    async def start(self, definition: CrewDefinition, inputs: dict[str, str], approve: str) -> str:
        """POST crew/run."""
        body = {"definition": definition.model_dump(mode="json"), "inputs": inputs}
        reply = await self._post("neta/api/crew/run", {**body, "approve": approve})
        return str(reply["requestId"])

    async def follow(self, request_id: str, after: int) -> AsyncIterator[Envelope]:
        """Over SSE, reconnecting after ``lastEventId`` when the stream drops."""
        while True:
            params = {"requestId": request_id, "lastEventId": str(after)}
            try:
                async with aconnect_sse(
                    self.http, "GET", "neta/api/crew/stream", params=params
                ) as src:
                    if src.response.status_code == 204:
                        return
                    async for event in src.aiter_sse():
                        if event.event == "HEARTBEAT":
                            continue
                        envelope = json.loads(event.data)
                        after = int(envelope["seq"])
                        yield envelope
                        if ends(envelope):
                            return
            except httpx.HTTPError:
                await asyncio.sleep(1.0)

    async def control(self, request_id: str, action: str, **fields: Any) -> dict[str, Any]:
        """POST crew/control."""
        body = {"requestId": request_id, "action": action, **_camel(fields)}
        return await self._post("neta/api/crew/control", body)

    async def aclose(self) -> None:
        """Close the connection (the crew goes on on the server)."""
        await self.http.aclose()


def _camel(fields: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in fields.items():
        head, *rest = key.split("_")
        out[head + "".join(part.title() for part in rest)] = value
    return out
