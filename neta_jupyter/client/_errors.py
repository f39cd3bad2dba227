"""What the run-API client raises, whichever transport it speaks over.

Exceptions (raised by the client and its transports, caught by the kernel hosts' callers — the
magics, run handles and widget — and by the terminal client)::

    ClientError                 every failure of a client call; ``message``, ``code``
    ├── TransportError          the run API could not be used at all
    │   ├── Unreachable         no connection, or it broke (``UNREACHABLE``)
    │   ├── InvalidAnswer       something answered that is not the run API (``INVALID_ANSWER``)
    │   ├── StreamInterrupted   a run's stream was cut before its terminal event (the client
    │   │                       reconnects after the last event it saw; ``STREAM_INTERRUPTED``)
    │   └── StreamLost          reconnecting gave up after too many tries (``STREAM_LOST``)
    └── Refused                 the run API answered with an error; ``status``, ``code`` = errCode
        ├── BadRequest          400: invalid fields, empty prompt, unknown model, answer required, …
        ├── Unauthorized        401, 403: no or a wrong token (Jupyter says 403 for both)
        ├── NotFound            404: no such run, session or attachment (or another user's)
        ├── Conflict            409: the run's state forbids it (not suspended, not active,
        │                       imported, session busy, another ask pending)
        ├── Gone                410: the run's events were deleted after it ended (kept for a
        │                       configured time); its status and session tree remain
        ├── PayloadTooLarge     413: the body is over the server's limit
        ├── OutOfRange          416: ``lastEventId`` past the end of the run
        └── ServerError         5xx: the server or its storage failed (503: what is wrong)

:func:`refusal` is the one place an error answer becomes an exception; both transports use it.
"""

from __future__ import annotations

from typing import Any


class ClientError(Exception):
    """A client call failed; ``message`` says why, ``code`` is a stable name for it."""

    code = "CLIENT_ERROR"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class TransportError(ClientError):
    """The run API could not be used: no connection, a broken stream, a foreign answer."""


class Unreachable(TransportError):
    """No connection to the run API, or it broke mid-request."""

    code = "UNREACHABLE"


class InvalidAnswer(TransportError):
    """An answer that is not the run API's (another server, a proxy's page)."""

    code = "INVALID_ANSWER"


class StreamInterrupted(TransportError):
    """A run's stream ended before its terminal event; following reconnects after it."""

    code = "STREAM_INTERRUPTED"


class StreamLost(TransportError):
    """Following gave up: the stream could not be resumed for too many tries in a row."""

    code = "STREAM_LOST"


class Refused(ClientError):
    """The run API answered with an error body (seed 003): ``status`` and its ``errCode``."""

    status = 400

    def __init__(
        self, message: str, *, code: str, status: int, request_id: str | None = None
    ) -> None:
        super().__init__(message, code=code)
        self.status = status
        self.request_id = request_id


class BadRequest(Refused):
    """400: the request itself is invalid."""


class Unauthorized(Refused):
    """401 or 403: no token, or a wrong one."""


class NotFound(Refused):
    """404: nothing by that id exists for this user."""


class Conflict(Refused):
    """409: the run is not in a state that allows the action."""


class Gone(Refused):
    """410: the run's events were deleted once they had been kept long enough after it ended."""


class PayloadTooLarge(Refused):
    """413: the body is over the server's limit."""


class OutOfRange(Refused):
    """416: the ``lastEventId`` names events that never existed."""


class ServerError(Refused):
    """5xx: the server failed, or its storage (503, with what is wrong)."""


_BY_STATUS: dict[int, type[Refused]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Unauthorized,
    404: NotFound,
    409: Conflict,
    410: Gone,
    413: PayloadTooLarge,
    416: OutOfRange,
}


def refusal(status: int, body: Any) -> Refused:
    """The exception for an error answer: ``status`` and its body (seed 003's, when it is one)."""
    fields = body if isinstance(body, dict) else {}
    message = fields.get("message")
    code = fields.get("errCode")
    request_id = fields.get("requestId")
    kind = _BY_STATUS.get(status) or (ServerError if status >= 500 else Refused)
    return kind(
        str(message) if message else f"the run API answered HTTP {status}",
        code=str(code) if code else f"HTTP_{status}",
        status=status,
        request_id=request_id if isinstance(request_id, str) else None,
    )
