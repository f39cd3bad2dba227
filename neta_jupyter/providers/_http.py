"""What the HTTP providers share: one streaming POST, and vendor failures as typed errors.

Every failure a vendor endpoint can produce leaves here as a :class:`ProviderError`:

* an HTTP error status, read from the vendor's error body (:func:`error_for_status`);
* an error object sent inside an otherwise healthy stream (:func:`error_for_payload`);
* an httpx transport failure (connect, timeout, a connection dropped mid-body), translated with
  ``raise … from exc`` so no httpx exception reaches the runtime.

API keys are secrets: every message built here goes through :func:`scrub` first, so neither the
key nor a vendor's masked echo of it (``sk-…abcd``) ends up in an event, a log or a traceback.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import re
import time
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

import httpx
from httpx_sse import ServerSentEvent, aconnect_sse

from .base import (
    AuthenticationRequired,
    ContextTooLong,
    ProviderError,
    ProviderInvalidRequest,
    ProviderUnavailable,
    RateLimited,
    StreamPart,
)

DEFAULT_TIMEOUT = httpx.Timeout(connect=10.0, read=300.0, write=60.0, pool=30.0)
"""For a client the provider makes itself: long reads, because reasoning models pause."""
DRAIN_SECONDS = 2.0
"""How long to wait for the end of the body after the vendor's end-of-stream event."""

_KEY_LIKE = re.compile(r"\b(?:sk|xai|gsk)-[A-Za-z0-9_*.\-]{6,}|Bearer\s+\S+", re.IGNORECASE)
_CONTEXT_OVERFLOW = re.compile(
    r"context[ _](?:length|window|size)|prompt is too long|too many (?:input )?tokens"
    r"|maximum context|exceeds? the (?:model'?s? )?(?:maximum )?(?:context|token limit)",
    re.IGNORECASE,
)
# What servers answer with HTTP 500 when the request itself is at fault (llama.cpp reports every
# exception of its request parsing so: "Failed to parse tool call arguments as JSON: …",
# "Unsupported param: …", "tools param requires --jinja flag"; Ollama: "json: cannot unmarshal").
_BAD_REQUEST = re.compile(
    r"failed to parse|unsupported param|requires? (?:the )?--\w|cannot unmarshal|is required\b"
    r"|must not be empty|must be (?:a|an|one of)\b|cannot (?:specify|use) both|not supported"
    r"|invalid (?:json|argument|param|request|value|base64|tool)",
    re.IGNORECASE,
)
# llama.cpp without a vision projector: "image input is not supported - hint: … mmproj"; vLLM
# and others say a text-only model takes no "image" content.
_NO_IMAGES = re.compile(r"image input is not supported|image.{0,40}not supported|mmproj", re.I)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TRANSIENT_STATUSES = frozenset({408, 409, 502, 503, 504, 529})
"""Statuses that say "later": overload, gateways, timeouts. Other 5xx may repeat every time."""
_QUOTA_CODES = frozenset({"insufficient_quota", "billing_hard_limit_reached"})
# The status each vendor error ``type`` stands for when it arrives inside a stream.
_STATUS_OF_TYPE = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "api_error": 500,
    "server_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


@dataclass(frozen=True, slots=True)
class Vendor:
    """Who is on the other end, for error messages: ``Vendor("OpenAI", "OPENAI_API_KEY")``."""

    label: str
    key_env: str
    """Where the key comes from, named in authentication errors."""


@dataclass(frozen=True, slots=True)
class VendorError:
    """A vendor's error object, whatever its shape."""

    message: str
    type: str | None = None
    code: str | None = None


def scrub(text: str, secret: str | None) -> str:
    """``text`` without the secret and without anything shaped like an API key."""
    if secret:
        text = text.replace(secret, "[redacted]")
    return _KEY_LIKE.sub("[redacted]", text)


def parse_error_body(text: str) -> VendorError:
    """Read the shapes OpenAI, Anthropic, vLLM, Ollama and llama.cpp use for errors."""
    try:
        body: Any = json.loads(text)
    except ValueError:
        return VendorError(text.strip()[:500])
    return error_from_json(body) or VendorError(text.strip()[:500])


def error_from_json(body: Any) -> VendorError | None:
    """The error object in a decoded body or stream chunk; None when there is none."""
    if not isinstance(body, dict):
        return None
    error = body.get("error")
    if isinstance(error, str):
        return VendorError(error, body.get("type"), _str_or_none(body.get("code")))
    if isinstance(error, dict):
        return VendorError(
            str(error.get("message") or error.get("type") or "unknown error"),
            _str_or_none(error.get("type")),
            _str_or_none(error.get("code")),
        )
    if body.get("object") == "error" or (body.get("type") == "error" and "message" in body):
        return VendorError(
            str(body.get("message", "")),
            _str_or_none(body.get("type")),
            _str_or_none(body.get("code")),
        )
    if "detail" in body:  # FastAPI-style servers
        return VendorError(str(body["detail"])[:500])
    return None


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def is_context_overflow(error: VendorError) -> bool:
    """Whether the vendor says the prompt does not fit the context window."""
    return error.code == "context_length_exceeded" or bool(
        _CONTEXT_OVERFLOW.search(error.message) or _CONTEXT_OVERFLOW.search(error.type or "")
    )


def error_for_status(
    status: int,
    error: VendorError,
    vendor: Vendor,
    *,
    secret: str | None,
    headers: Mapping[str, str] | None = None,
) -> ProviderError:
    """The typed error for an HTTP error status (or the status a stream error stands for)."""
    detail = scrub(error.message, secret) or f"HTTP {status}"
    if _NO_IMAGES.search(error.message):
        detail += ' (the model takes no images: set "vision": false on its endpoint)'
    where = f"{vendor.label} (HTTP {status})"
    if status == 429:
        if error.code in _QUOTA_CODES or error.type in _QUOTA_CODES:
            return ProviderInvalidRequest(f"{where}: quota exhausted: {detail}")
        wait = retry_after(headers) if headers is not None else None
        return RateLimited(f"{where}: rate limited: {detail}", retry_after=wait)
    if status == 401:
        # The message of a 401 often echoes part of the key, so it is left out entirely.
        return _refused(
            vendor, f"{vendor.label}: authentication failed (HTTP 401) — check {vendor.key_env}"
        )
    if status == 403:
        return _refused(
            vendor,
            f"{vendor.label}: authentication failed (HTTP 403) — check {vendor.key_env}: {detail}",
        )
    if status == 413 or is_context_overflow(error):
        return ContextTooLong(f"{where}: the request does not fit the context window: {detail}")
    if status >= 500 and _BAD_REQUEST.search(error.message):
        # Retrying the same request cannot help, whatever the status says.
        return ProviderInvalidRequest(f"{where}: request rejected: {detail}")
    if status in _TRANSIENT_STATUSES:
        return ProviderUnavailable(f"{where}: unavailable: {detail}")
    if status >= 500:
        return ProviderUnavailable(f"{where}: server error: {detail}", transient=False)
    return ProviderInvalidRequest(f"{where}: request rejected: {detail}")


def _refused(vendor: Vendor, message: str) -> AuthenticationRequired:
    variable = vendor.key_env if _ENV_NAME.match(vendor.key_env) else None
    where = f"the key in {variable}" if variable else "the endpoint's key"
    return AuthenticationRequired(
        message,
        model=vendor.label,
        variable=variable,
        user_message=(
            f"{vendor.label} refused {where}: set it to a valid key for the Jupyter server (or "
            "for neta-jupyter run) and start it again."
        ),
    )


def error_for_payload(error: VendorError, vendor: Vendor, *, secret: str | None) -> ProviderError:
    """The typed error for an error object sent inside a stream."""
    status = _STATUS_OF_TYPE.get(error.type or "") or _STATUS_OF_TYPE.get(error.code or "")
    if error.code and error.code.isdigit() and 400 <= int(error.code) < 600:
        status = int(error.code)  # compatible servers put the HTTP status they mean here
    if status is None and error.code == "context_length_exceeded":
        status = 400
    if status is None:
        # An unknown failure mid-stream: most likely the server's own trouble, worth a retry.
        detail = scrub(error.message, secret) or "unknown error"
        return ProviderUnavailable(
            f"{vendor.label}: the stream reported an error: {detail}", transient=False
        )
    return error_for_status(status, error, vendor, secret=secret)


def stream_cut_short(vendor: Vendor) -> ProviderUnavailable:
    """The connection ended before the vendor's end-of-stream marker."""
    return ProviderUnavailable(
        f"{vendor.label}: the connection closed before the reply was complete", network_error=True
    )


def malformed(vendor: Vendor, what: str) -> ProviderUnavailable:
    """The stream carried something that is not the vendor's format."""
    return ProviderUnavailable(f"{vendor.label}: malformed stream: {what}", transient=False)


def decode_json(data: str, vendor: Vendor) -> dict[str, Any]:
    """One SSE ``data`` field as a JSON object."""
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise malformed(vendor, f"data is not JSON ({data[:80]!r})") from exc
    if not isinstance(value, dict):
        raise malformed(vendor, f"data is not a JSON object ({data[:80]!r})")
    return value


_SHARED: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
    weakref.WeakKeyDictionary()
)


def shared_client() -> httpx.AsyncClient:
    """The running loop's one client for models given none.

    Making an httpx client loads the CA certificates: 30-100 ms of CPU on the loop's thread,
    which every stream on the server waited through at each model call. One client also keeps
    its connections to the provider open between calls (no new TCP and TLS handshake), with no
    cap on how many run at once: each concurrent run streams on a connection of its own.
    """
    loop = asyncio.get_running_loop()
    client = _SHARED.get(loop)
    if client is None or client.is_closed:
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=100)
        client = httpx.AsyncClient(timeout=DEFAULT_TIMEOUT, limits=limits)
        _SHARED[loop] = client
    return client


async def post_event_stream(
    client: httpx.AsyncClient | None,
    url: str,
    *,
    headers: dict[str, str],
    body: dict[str, Any],
    vendor: Vendor,
    secret: str | None,
    is_end: Callable[[ServerSentEvent], bool],
) -> AsyncGenerator[ServerSentEvent, None]:
    """POST ``body`` and yield the server-sent events of the reply, up to the one ``is_end``.

    Raises :class:`ProviderError` for an error status, a reply that is not an event stream and
    every transport failure. After the end event the rest of the body is read (briefly) and
    dropped, so the connection can be reused; a consumer should keep iterating until the
    generator ends rather than break out at the end event. Use it under
    ``contextlib.aclosing`` so an early exit still closes the response. Without ``client`` the
    loop's shared client is used (``shared_client``).
    """
    http = client or shared_client()
    try:
        async with aconnect_sse(http, "POST", url, headers=headers, json=body) as source:
            await _check_reply(source.response, url, vendor, secret)
            async with aclosing(source.aiter_sse()) as events:
                async for event in events:
                    yield event
                    if is_end(event):
                        await _drain(events)
                        return
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise transport_error(exc, url, vendor, secret) from exc


async def _check_reply(
    response: httpx.Response, url: str, vendor: Vendor, secret: str | None
) -> None:
    """Raise unless the reply is a successful event stream."""
    if response.status_code >= 400:
        await response.aread()
        raise error_for_status(
            response.status_code,
            parse_error_body(response.text),
            vendor,
            secret=secret,
            headers=response.headers,
        )
    content_type = response.headers.get("content-type", "")
    if "text/event-stream" not in content_type:
        await response.aread()
        found = error_from_json(_json_or_none(response.text))
        if found is not None:
            raise error_for_payload(found, vendor, secret=secret)
        raise ProviderInvalidRequest(
            f"{vendor.label}: expected an event stream from {url}, "
            f"got {content_type or 'no content type'}"
        )


def transport_error(
    exc: httpx.HTTPError | httpx.InvalidURL, url: str, vendor: Vendor, secret: str | None
) -> ProviderError:
    """The provider error for an httpx failure (raise it ``from exc``)."""
    detail = scrub(str(exc), secret) or type(exc).__name__
    match exc:
        case httpx.TimeoutException():
            return ProviderUnavailable(
                f"{vendor.label}: {_timeout_kind(exc)} timed out", network_error=True
            )
        case httpx.UnsupportedProtocol() | httpx.InvalidURL():
            return ProviderInvalidRequest(f"{vendor.label}: cannot reach {url}: {detail}")
        case httpx.TransportError():
            return ProviderUnavailable(
                f"{vendor.label}: network error: {detail}", network_error=True
            )
        case _:  # decoding errors and the like: a damaged reply
            return ProviderUnavailable(f"{vendor.label}: {type(exc).__name__}: {detail}")


async def _drain(events: AsyncIterator[ServerSentEvent]) -> None:
    """Read what follows the end event; the reply is complete, so failures here do not count."""
    try:
        async with asyncio.timeout(DRAIN_SECONDS):
            async for _ in events:
                pass
    except (TimeoutError, httpx.HTTPError):
        pass


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _timeout_kind(exc: httpx.TimeoutException) -> str:
    match exc:
        case httpx.ConnectTimeout():
            return "connecting"
        case httpx.ReadTimeout():
            return "waiting for the reply"
        case httpx.WriteTimeout():
            return "sending the request"
        case _:
            return "the request"


class HttpModel:
    """What the HTTP providers share: endpoint, key, client, name, and one streaming call.

    The key is sent only in the vendor's auth header and never appears in the repr or errors.
    """

    def __init__(
        self,
        model_name: str,
        *,
        base_url: str,
        api_key: str | None,
        client: httpx.AsyncClient | None,
        name: str,
        vendor: Vendor,
    ) -> None:
        self.model_name = model_name
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._client = client
        self._name = name
        self._vendor = vendor

    @property
    def name(self) -> str:
        """``provider:model`` as the user selected it."""
        return self._name

    def _settings(self) -> str:
        """Extra ``name=value`` pairs for the repr."""
        return ""

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.model_name!r}, base_url={self.base_url!r}, "
            f"name={self._name!r}{self._settings()})"
        )

    async def _stream_parts(
        self,
        path: str,
        headers: dict[str, str],
        body: dict[str, Any],
        is_end: Callable[[ServerSentEvent], bool],
        parts_of: Callable[[ServerSentEvent], Iterable[StreamPart]],
    ) -> AsyncIterator[StreamPart]:
        """POST ``body`` to ``path`` and yield ``parts_of`` each event.

        A vendor error inside the stream is raised once the body has been read to the end, so
        the connection can be reused.
        """
        events = post_event_stream(
            self._client,
            f"{self.base_url}{path}",
            headers=headers,
            body=body,
            vendor=self._vendor,
            secret=self._api_key,
            is_end=is_end,
        )
        failure: ProviderError | None = None
        async with aclosing(events):
            async for event in events:  # to the end: the helper reads the body out after the end
                if failure is not None:
                    continue
                try:
                    for part in parts_of(event):
                        yield part
                except ProviderError as exc:
                    failure = exc
        if failure is not None:
            raise failure
