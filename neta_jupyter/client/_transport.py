"""The seam under the client: a call goes out, a JSON answer (or a typed error) comes back.

A transport moves calls and one stream connection at a time; everything a client adds on top —
request bodies from models, reconnecting after the last event seen, dropping repeats, giving up —
lives in :class:`~neta_jupyter.client.RunClient`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from ..events import TERMINAL_EVENT_TYPES


@dataclass(frozen=True, slots=True)
class Call:
    """One request of the run API: a method and a path under ``neta/api/``, a JSON body."""

    method: str
    """``GET`` or ``POST``."""
    path: str
    """Under ``neta/api/``, e.g. ``agent/run/async``."""
    body: dict[str, Any] | None = None
    """The JSON body of a ``POST``."""
    params: dict[str, str] = field(default_factory=dict)
    """Query parameters of a ``GET``."""
    file: tuple[str, bytes] | None = None
    """A file's name and bytes: the body of an upload (instead of JSON)."""


class Received(NamedTuple):
    """One event of a run's stream, as stored: its ``seq``, its type and its envelope JSON."""

    seq: int
    event_type: str
    payload: str

    @property
    def terminal(self) -> bool:
        """Whether the event ends a stream segment (completed, suspended or failed)."""
        return self.event_type in TERMINAL_EVENT_TYPES

    def envelope(self) -> dict[str, Any]:
        """The envelope, decoded."""
        decoded: dict[str, Any] = json.loads(self.payload)
        return decoded


class Transport(Protocol):
    """Where the run API is: a Jupyter server (HTTP and SSE) or a runtime in this process."""

    async def send(self, call: Call) -> dict[str, Any]:
        """The JSON answer of a success; raises :class:`Refused` for an error answer."""
        ...

    def send_blocking(self, call: Call) -> dict[str, Any]:
        """The same without the event loop, for answers a caller needs at once.

        Queries always work; actions only where the run API is elsewhere (HTTP).
        """
        ...

    def stream(self, request_id: str, after: int) -> AsyncGenerator[Received, None]:
        """One stream connection: events after ``after`` up to and including a terminal one.

        Yields nothing when the run is at rest and nothing will follow. Raises
        :class:`StreamInterrupted` (or another :class:`TransportError`) when the connection ends
        before a terminal event, :class:`Refused` when the run API refuses the stream.
        """
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...
