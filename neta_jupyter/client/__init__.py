"""The one client of the run API, over two transports.

* :class:`HttpTransport`: a Jupyter server running the extension (REST with httpx, the stream as
  Server-Sent Events with httpx-sse) — the kernel's server host and ``neta-jupyter run --server``.
* :class:`InProcessTransport`: a :class:`~neta_jupyter.runtime.Runtime` in this process — the
  embedded kernel host and ``neta-jupyter run``. It answers the server's routes with the server's
  bodies, answers and errors.

:class:`RunClient` holds what does not depend on where the runs live: request bodies built from
the run API's own models (:class:`RunRequest` is the server's request schema), answers read into
typed results, following a run with reconnects after the last event seen and no repeats, and
errors mapped from HTTP status and ``errCode`` to the exceptions of :mod:`._errors` (drawn there
as a tree). :class:`~neta_jupyter.client.mock.MockTransport` is the fake beside the seam.

    client = RunClient(HttpTransport("http://localhost:8888/", headers={"Authorization": ...}))
    started = await client.start(RunRequest(content="what is in df?", approve="auto"))
    async for event in client.follow(started.request_id):
        print(event.event_type)
"""

from ..runtime.requests import RunRequest
from ._client import RECONNECTS, RunClient, Started, attachment_sources
from ._errors import (
    BadRequest,
    ClientError,
    Conflict,
    Gone,
    InvalidAnswer,
    NotFound,
    OutOfRange,
    PayloadTooLarge,
    Refused,
    ServerError,
    StreamInterrupted,
    StreamLost,
    TransportError,
    Unauthorized,
    Unreachable,
    refusal,
)
from ._http import HttpTransport
from ._inprocess import InProcessTransport
from ._transport import Call, Received, Transport

__all__ = [
    "RECONNECTS",
    "BadRequest",
    "Call",
    "ClientError",
    "Conflict",
    "Gone",
    "HttpTransport",
    "InProcessTransport",
    "InvalidAnswer",
    "NotFound",
    "OutOfRange",
    "PayloadTooLarge",
    "Received",
    "Refused",
    "RunClient",
    "RunRequest",
    "ServerError",
    "Started",
    "StreamInterrupted",
    "StreamLost",
    "Transport",
    "TransportError",
    "Unauthorized",
    "Unreachable",
    "attachment_sources",
    "refusal",
]
