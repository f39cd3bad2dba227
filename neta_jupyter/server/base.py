"""The base of every REST handler: auth, seed-003 errors, body parsing, access to the runtime."""

from __future__ import annotations

import hmac
import json
from typing import Any, TypeVar

from jupyter_server.auth.identity import User
from jupyter_server.base.handlers import APIHandler, JupyterHandler
from pydantic import BaseModel, ValidationError
from tornado import web

from ..runtime import RunApiError, Runtime
from ..store import StorageError
from .errors import ApiError, describe_validation, error_body
from .principals import OWNER, KernelOwners, principal_of
from .schemas import parse_json_object

__all__ = ["AUTH_RESOURCE", "NetaHandler", "principal_of"]

AUTH_RESOURCE = "neta"


B = TypeVar("B", bound=BaseModel)

_STATUS_CODES = {
    400: "BAD_REQUEST",
    401: "UNAUTHORIZED",
    403: "FORBIDDEN",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    409: "CONFLICT",
    413: "BODY_TOO_LARGE",
    503: "UNAVAILABLE",
}


@web.stream_request_body
class NetaHandler(APIHandler):
    """Thin: authenticate, parse, delegate to the runtime, reply."""

    auth_resource = AUTH_RESOURCE

    @property
    def runtime(self) -> Runtime:
        """The process's runtime."""
        runtime: Runtime = self.settings["neta_runtime"]
        return runtime

    @property
    def principal(self) -> str:
        """Who owns the runs this request may see."""
        return principal_of(self)

    async def prepare(self) -> None:  # type: ignore[override]
        """Refuse a body over the limit before reading it; authenticate kernels by their token.

        The body streams in (``data_received``) only after this, so a request that announces too
        large a body is answered 413 at once and its body is never buffered.
        """
        self._body: list[bytes] = []
        self._body_size = 0
        self._body_over_limit = False
        declared = self.request.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > self._body_limit:
            raise self._too_large()
        kernel_user = self._kernel_principal()
        if kernel_user is not None:
            self.current_user = self._jupyter_current_user = User(username=kernel_user)
            return
        await super().prepare()

    def data_received(self, chunk: bytes) -> None:
        """Keep the body up to the limit (a chunked body has no Content-Length to check first)."""
        self._body_size += len(chunk)
        if self._body_size > self._body_limit:
            self._body_over_limit, self._body = True, []
        elif not self._body_over_limit:
            self._body.append(chunk)

    @property
    def _body_limit(self) -> int:
        return int(self.settings.get("neta_max_body_bytes", 1_000_000))

    def _too_large(self) -> ApiError:
        limit = self._body_limit
        return ApiError(413, "BODY_TOO_LARGE", f"request body is over the limit of {limit} bytes")

    def check_xsrf_cookie(self) -> None:
        """A kernel-token request carries no cookie, so XSRF does not apply to it."""
        if self._kernel_principal() is not None:
            return
        super().check_xsrf_cookie()

    def _kernel_principal(self) -> str | None:
        """The user whose kernel sent this request (``Authorization: neta-kernel <token>``)."""
        scheme, _, value = self.request.headers.get("Authorization", "").partition(" ")
        token = value.strip()
        if scheme.lower() != "neta-kernel" or not token:
            return None
        owners: KernelOwners | None = self.settings.get("neta_kernel_owners")
        found = owners.principal(token) if owners is not None else None
        if found is not None:
            return found
        shared = self.settings.get("neta_kernel_token")
        if shared and hmac.compare_digest(token, str(shared)):
            return str(self.settings.get("neta_owner", OWNER))
        return None

    def set_default_headers(self) -> None:
        """No caching of API answers."""
        super().set_default_headers()
        self.set_header("Cache-Control", "no-store")

    def finish(self, *args: Any, **kwargs: Any) -> Any:
        """Keep the content type the handler chose (APIHandler would force JSON)."""
        self.update_api_activity()
        return JupyterHandler.finish(self, *args, **kwargs)

    def parse_body(self, model: type[B]) -> B:
        """The JSON body validated as ``model``; a clear 4xx otherwise."""
        if self._body_over_limit:
            raise self._too_large()
        raw = parse_json_object(b"".join(self._body) or b"{}", "request body")
        try:
            return model.model_validate(raw)
        except ValidationError as exc:
            request_id = raw.get("requestId") if isinstance(raw.get("requestId"), str) else None
            raise ApiError(400, "INVALID_FIELDS", describe_validation(exc), request_id) from exc

    def query(self, name: str, *, required: bool = True) -> str | None:
        """A query argument; a clear 400 when a required one is missing."""
        value = self.get_query_argument(name, None)
        if required and not value:
            raise ApiError(400, "MISSING_PARAMETER", f"query parameter {name!r} is required")
        return value

    def reply(self, body: dict[str, Any], status: int = 200) -> None:
        """A JSON success answer (with any known secret cut out)."""
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        text = json.dumps({"success": True, **body})
        redact = self.settings.get("neta_redactor")
        self.finish(redact(text) if redact is not None else text)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """Every error in seed 003's shape; never a traceback."""
        exc = kwargs.get("exc_info", (None, None, None))[1]
        match exc:
            case ApiError():
                status, code, message, rid = exc.status, exc.code, exc.message, exc.request_id
            case RunApiError() | StorageError():
                status, code, message, rid = exc.status, exc.code, exc.message, None
            case web.HTTPError():
                status = exc.status_code
                code = _STATUS_CODES.get(status, "HTTP_ERROR")
                message = exc.log_message or self._reason
                rid = None
            case _:
                status, code, message, rid = 500, "INTERNAL_ERROR", "internal server error", None
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        redact = self.settings.get("neta_redactor")
        if redact is not None:
            message = redact(message)
        self.finish(json.dumps(error_body(status, code, message, rid)))

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        """Expected API errors are not server faults: log them briefly."""
        if isinstance(value, ApiError | RunApiError | StorageError):
            # A storage fault is logged by the store, once per spell of them.
            self.log.info("neta: %s %s", type(value).__name__, value)
            return
        super().log_exception(typ, value, tb)

    def _handle_request_exception(self, e: BaseException) -> None:
        if isinstance(e, ApiError | RunApiError | StorageError):
            self.send_error(e.status, exc_info=(type(e), e, e.__traceback__))
            return
        super()._handle_request_exception(e)
