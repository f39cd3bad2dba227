"""Errors of the runtime's public API, carrying the code and status a transport reports.

Exceptions (who raises → who catches)::

    RunApiError            raised by Runtime methods, caught by server/ handlers and the CLI
    ├── RunNotFound        unknown request or session, or one of another principal (404)
    ├── RunConflict        the run is not in a state that allows the action (409)
    └── BadRunRequest      the request itself is invalid (400)
"""

from __future__ import annotations


class RunApiError(Exception):
    """An action on a run was refused; ``code`` is the seed-003 ``errCode``."""

    status = 400
    code = "BAD_REQUEST"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class RunNotFound(RunApiError):
    """Nothing by that id exists for this principal."""

    status = 404
    code = "RUN_NOT_FOUND"


class RunConflict(RunApiError):
    """The run's state does not allow the action."""

    status = 409
    code = "RUN_STATE_CONFLICT"


class BadRunRequest(RunApiError):
    """The request is malformed."""

    status = 400
    code = "BAD_REQUEST"
