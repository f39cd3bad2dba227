"""A transport answered by functions: for testing code that uses a :class:`RunClient`.

``answer(call)`` returns a call's JSON answer (or raises a client error); ``connect(request_id,
after)`` returns what one stream connection delivers: events, then optionally an exception that
ends the connection (such as :class:`StreamInterrupted`).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any

from ._transport import Call, Received

Answerer = Callable[[Call], dict[str, Any]]
Connector = Callable[[str, int], Sequence[Received | Exception]]


class MockTransport:
    """A :class:`~neta_jupyter.client.Transport` whose answers and streams come from functions."""

    def __init__(self, answer: Answerer | None = None, connect: Connector | None = None) -> None:
        self._answer = answer or (lambda call: {})
        self._connect = connect or (lambda request_id, after: [])
        self.calls: list[Call] = []
        """Every call sent, in order."""
        self.connections: list[int] = []
        """The ``after`` of every stream connection, in order."""

    async def send(self, call: Call) -> dict[str, Any]:
        """The answerer's answer."""
        return self.send_blocking(call)

    def send_blocking(self, call: Call) -> dict[str, Any]:
        """The answerer's answer."""
        self.calls.append(call)
        return self._answer(call)

    async def stream(self, request_id: str, after: int) -> AsyncGenerator[Received, None]:
        """What the connector says this connection delivers."""
        self.connections.append(after)
        for item in self._connect(request_id, after):
            if isinstance(item, Exception):
                raise item
            yield item

    async def aclose(self) -> None:
        """Nothing to release."""
