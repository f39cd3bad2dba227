"""HTTP errors in seed 003's body shape; tornado's errors are translated here, nowhere else."""

from __future__ import annotations

from typing import Any

from ..runtime.requests import describe_validation

__all__ = ["ApiError", "describe_validation", "error_body"]


class ApiError(Exception):
    """An error answered with ``{httpStatusCode, message, success, errCode, requestId, data}``."""

    def __init__(self, status: int, code: str, message: str, request_id: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.request_id = request_id


def error_body(status: int, code: str, message: str, request_id: str | None) -> dict[str, Any]:
    """The seed-003 error body."""
    return {
        "httpStatusCode": status,
        "message": message,
        "data": None,
        "success": False,
        "errCode": code,
        "requestId": request_id,
    }
