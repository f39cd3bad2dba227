"""Completion webhooks: a POST to each configured URL when a run's stream segment ends.

``c.NetaApp.webhooks`` lists ``{"url", "events", "secret"}`` entries. Once a terminal event
(``MESSAGE_COMPLETED``, ``MESSAGE_FAILED``, ``MESSAGE_SUSPENDED``) that this server wrote is
durable, each entry that asked for its type gets one POST whose body is the event's envelope as
the run API's event stream carries it (secrets already redacted). Headers:

* ``X-Neta-Event``: the event type;
* ``X-Neta-Delivery``: ``<requestId>:<seq>``, the same on every attempt (receivers may dedupe);
* ``X-Neta-Signature-256``: ``sha256=<hex HMAC-SHA256 of the body with the entry's secret>``,
  when the entry has a secret.

Deliveries run on their own tasks, so a slow or failing receiver never holds a run. A delivery
that fails (the connection, a timeout, a 5xx, 408 or 429) is sent again after a backoff that
doubles from ``webhook_retry_delay`` up to a minute, ``webhook_retries`` times at most; other
answers end it. What went wrong is logged without the secret.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
from collections.abc import Iterable
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .._version import __version__
from ..events import TERMINAL_EVENT_TYPES
from ..runtime.context.fetch import AddressPolicy, guarded_transport, refused_by_policy
from ..store import Store
from ..store.contract import EventRow

TerminalType = Literal["MESSAGE_COMPLETED", "MESSAGE_FAILED", "MESSAGE_SUSPENDED"]
SIGNATURE_HEADER = "X-Neta-Signature-256"
EVENT_HEADER = "X-Neta-Event"
DELIVERY_HEADER = "X-Neta-Delivery"
MAX_DELAY = 60.0
"""Longest wait between two attempts of a delivery, in seconds."""
TIMEOUT = 10.0
"""Seconds one attempt may take."""
CLOSE_GRACE = 5.0
"""Seconds a stopping server gives the deliveries under way (the endings of its runs)."""
_RETRIED_STATUSES = frozenset({408, 429})


class Webhook(BaseModel):
    """One ``c.NetaApp.webhooks`` entry."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str
    """Where the POST goes (http or https)."""
    events: tuple[TerminalType, ...] = Field(
        default=("MESSAGE_COMPLETED", "MESSAGE_FAILED", "MESSAGE_SUSPENDED"), min_length=1
    )
    """The terminal event types it is called for."""
    secret: str | None = Field(default=None, repr=False)
    """Key of the body's HMAC-SHA256 signature (``X-Neta-Signature-256``)."""

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        parsed = httpx.URL(url)
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ValueError("must be an http:// or https:// URL")
        return url

    def signature(self, body: bytes) -> str | None:
        """The signature header's value for ``body``; None without a secret."""
        if not self.secret:
            return None
        return "sha256=" + hmac.new(self.secret.encode(), body, hashlib.sha256).hexdigest()


def parse_webhooks(entries: Iterable[Any]) -> tuple[list[Webhook], list[str]]:
    """The entries that can be used, and for each other one which it is and why not."""
    hooks, problems = [], []
    for index, entry in enumerate(entries):
        try:
            hooks.append(Webhook.model_validate(entry))
        except ValidationError as exc:
            why = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'entry'}: {e['msg']}"
                for e in exc.errors(include_input=False)
            )
            problems.append(f"c.NetaApp.webhooks[{index}] is not used: {why}")
    return hooks, problems


class Webhooks:
    """Delivers the terminal events this server writes to the configured webhooks."""

    def __init__(
        self,
        hooks: list[Webhook],
        *,
        retries: int = 6,
        retry_delay: float = 1.0,
        log: logging.Logger | None = None,
        allowlist: Iterable[str] = (),
    ) -> None:
        self.hooks = hooks
        self._allowlist = tuple(allowlist)
        self._retries = max(0, retries)
        self._delay = max(0.0, retry_delay)
        self._log = log or logging.getLogger("neta_jupyter")
        self._waiting: list[tuple[Webhook, EventRow]] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._client: httpx.AsyncClient | None = None
        self._closed = False

    def watch(self, store: Store) -> None:
        """Be told of every event the store makes durable for this server (and its secrets)."""
        if self.hooks:
            store.events.on_durable(self.durable)
            store.redactor.add(*(h.secret for h in self.hooks if h.secret))

    def durable(self, stream: str, rows: list[EventRow]) -> None:
        """Events became durable: the terminal ones are delivered (never waited for here)."""
        for row in rows:
            if row[1] in TERMINAL_EVENT_TYPES:
                for hook in self.hooks:
                    if row[1] in hook.events:
                        self._deliver_later(hook, row)

    def start(self) -> None:
        """Deliver what ended before the event loop ran (the start-up's recovery)."""
        waiting, self._waiting = self._waiting, []
        for hook, row in waiting:
            self._deliver_later(hook, row)

    async def close(self, grace: float = CLOSE_GRACE) -> None:
        """Stop delivering (the server shuts down), after ``grace`` seconds for those under way."""
        self._closed = True
        tasks = list(self._tasks)
        if tasks:
            await asyncio.wait(tasks, timeout=grace)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._client is not None:
            await self._client.aclose()

    def _deliver_later(self, hook: Webhook, row: EventRow) -> None:
        if self._closed:
            return
        try:
            task = asyncio.get_running_loop().create_task(self._deliver(hook, row))
        except RuntimeError:  # no event loop yet
            self._waiting.append((hook, row))
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _deliver(self, hook: Webhook, row: EventRow) -> None:
        seq, event_type, payload = row
        body = payload.encode()
        request_id = str(json.loads(payload).get("requestId", ""))
        headers = {
            "Content-Type": "application/json",
            "User-Agent": f"neta-jupyter/{__version__}",
            EVENT_HEADER: event_type,
            DELIVERY_HEADER: f"{request_id}:{seq}",
        }
        if (signature := hook.signature(body)) is not None:
            headers[SIGNATURE_HEADER] = signature
        delay = self._delay
        for attempt in range(self._retries + 1):
            why = await self._attempt(hook.url, body, headers)
            if why is None:
                return
            if attempt == self._retries:
                self._log.warning(
                    "neta: webhook %s gave up on %s of %s: %s",
                    hook.url,
                    event_type,
                    request_id,
                    why,
                )
                return
            await asyncio.sleep(delay)
            delay = min(MAX_DELAY, max(delay * 2, 0.001))

    async def _attempt(self, url: str, body: bytes, headers: dict[str, str]) -> str | None:
        """None when the receiver took it; else why it should be sent again."""
        if self._client is None:
            policy = AddressPolicy.from_allowlist(self._allowlist)
            self._client = httpx.AsyncClient(
                timeout=TIMEOUT, trust_env=False, transport=guarded_transport(policy)
            )
        try:
            response = await self._client.post(url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            if (refused := refused_by_policy(exc)) is not None:
                self._log.warning("neta: webhook %s is not called: %s", url, refused)
                return None  # the same answer every time: not sent again
            return f"{type(exc).__name__}: {exc}"
        if response.status_code >= 500 or response.status_code in _RETRIED_STATUSES:
            return f"HTTP {response.status_code}"
        if response.status_code >= 400:
            self._log.warning(
                "neta: webhook %s refused the call: HTTP %s", url, response.status_code
            )
        return None


def webhooks_of(
    entries: Iterable[Any],
    log: logging.Logger,
    *,
    retries: int,
    retry_delay: float,
    allowlist: Iterable[str] = (),
) -> Webhooks:
    """The notifier of the configured entries; each bad one is logged as an error.

    Receivers are reached under the same address policy as attached URLs (``allowlist``).
    """
    hooks, problems = parse_webhooks(entries)
    for problem in problems:
        log.error("neta: %s", problem)
    return Webhooks(hooks, retries=retries, retry_delay=retry_delay, log=log, allowlist=allowlist)
