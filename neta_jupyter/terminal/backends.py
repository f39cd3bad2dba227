"""Where a terminal run lives: the runtime embedded in this process, or a Jupyter server.

Both are a :class:`Backend` yielding the same envelope JSON, so one renderer draws either and one
asker answers either.

Errors::

    CliError        the run could not be started or followed (exit 2); printed, never a traceback
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

import httpx
from httpx_sse import SSEError, aconnect_sse
from jupyter_core.paths import jupyter_data_dir

from ..events import TERMINAL_EVENT_TYPES
from ..providers import UnknownModel
from ..runtime import RunApiError, RunConflict
from ..runtime.settings import build_runtime
from ..store import StorageDamaged, StorageError, Store
from ..store.health import DB_NAME, recovery_steps
from .config import ConfigError, load_settings
from .local_kernel import LocalKernel
from .prompts import Answer, Reply

RECONNECT_LIMIT = 8
"""Consecutive reconnects without a new event before giving up on a server stream."""


class CliError(Exception):
    """The run could not be started or followed; the message is shown as is."""


class Backend(Protocol):
    """Where the run lives: start it, stream its envelopes, answer it, stop it."""

    async def start(self) -> str:
        """Start the run; its requestId."""
        ...

    def segment(self, request_id: str, after: int) -> AsyncIterator[tuple[int, str]]:
        """``(seq, envelope JSON)`` after ``after``, up to and including a terminal event."""
        ...

    async def resume(self, request_id: str, ask_id: str, reply: Reply) -> None:
        """Answer the pending ask or question and let the run continue."""
        ...

    async def terminate(self, request_id: str) -> None:
        """Cancel the run (it ends with USER_CANCELLED)."""
        ...

    def locate(self, virtual_path: str) -> str:
        """Where the user can open an attachment."""
        ...

    def elsewhere(self, request_id: str) -> str | None:
        """Where else a waiting run can be answered, when not here."""
        ...

    async def aclose(self) -> None:
        """Release what the backend holds."""
        ...


def default_data_dir() -> Path:
    """``<jupyter data dir>/neta/cli``: the embedded runs' store, apart from the server's."""
    return Path(jupyter_data_dir()) / "neta" / "cli"


def _resume_fields(reply: Reply) -> dict[str, Any]:
    if isinstance(reply, Answer):
        return {"answer": reply.text}
    return {"approved": reply.approved, "always": reply.always}


class EmbeddedBackend:
    """The runtime in this process, with the server's settings, followed through its event log.

    Kernel tools run in a :class:`LocalKernel`, started at the first call that needs it.
    """

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        data_dir = Path(args.data_dir or default_data_dir()).expanduser()
        root = Path(args.root or Path.cwd()).expanduser().resolve()
        try:
            settings, _read = load_settings(args.config)
        except ConfigError as exc:
            raise CliError(str(exc)) from exc
        asked = [
            {"tool": name, "action": "ask", "description": f"--ask {name}: approval needed"}
            for name in args.ask or []
        ]
        settings.permission_rules = [*asked, *settings.permission_rules]
        if args.pace is not None:
            settings.demo_pace = args.pace
        try:
            data_dir.mkdir(parents=True, exist_ok=True)
            self.store = Store(data_dir / "neta.sqlite3")
        except OSError as exc:
            raise CliError(f"cannot open the run store in {data_dir}: {exc}") from exc
        except StorageError as exc:
            steps = ""
            if isinstance(exc, StorageDamaged):
                steps = f"; to recover, {recovery_steps(data_dir / DB_NAME)}"
            raise CliError(f"cannot open the run store: {exc.message}{steps}") from exc
        self.kernel = LocalKernel(root, log_file=data_dir / "kernel.log")
        try:
            self.runtime = build_runtime(
                settings,
                self.store,
                root_dir=root,
                data_dir=data_dir,
                kernels=lambda _run: self.kernel,
            )
        except (ValueError, ImportError, AttributeError, TypeError) as exc:
            self.store.close()
            raise CliError(f"the configuration cannot be used: {exc}") from exc
        self.principal = _user_name()
        if args.model and args.model.startswith("scripted:"):
            self._pin_script(args.model)

    def _pin_script(self, spec: str) -> None:
        """Load a script once, so a resumed run continues it instead of replaying it."""
        try:
            self.runtime.models.register(spec, self.runtime.models.resolve(spec))
        except UnknownModel as exc:
            raise CliError(str(exc)) from exc

    async def start(self) -> str:
        """Start the run in this process."""
        args = self.args
        try:
            run = await self.runtime.start(
                self.principal,
                args.prompt,
                model=args.model,
                session_name=args.session,
                max_steps=args.max_steps,
                approve="auto" if args.yes else "ask",
            )
        except RunApiError as exc:
            raise CliError(exc.message) from exc
        return run.request_id

    async def segment(self, request_id: str, after: int) -> AsyncIterator[tuple[int, str]]:
        """Read the log after ``after`` and tail it until the segment's terminal event."""
        batches = self.runtime.follow(request_id, after)
        try:
            async for batch in batches:
                for seq, kind, payload in batch:
                    yield seq, payload
                    if kind in TERMINAL_EVENT_TYPES:
                        return
        finally:
            # follow() tails forever; close it now rather than whenever it is collected.
            close = getattr(batches, "aclose", None)
            if close is not None:
                await close()

    async def resume(self, request_id: str, ask_id: str, reply: Reply) -> None:
        """Hand the reply to the runtime."""
        # The terminal event is in the log a moment before the activation has wound down, and
        # the runtime forgets a finished activation only in a done-callback, one tick later.
        while self.runtime.is_active(request_id):
            await self.runtime.wait(request_id)
            await asyncio.sleep(0)
        try:
            await self.runtime.resume(
                self.principal, request_id, ask_id=ask_id, **_resume_fields(reply)
            )
        except RunApiError as exc:
            raise CliError(exc.message) from exc

    async def terminate(self, request_id: str) -> None:
        """Cancel the run; one that already ended is left as it is."""
        with contextlib.suppress(RunConflict):
            await self.runtime.terminate(self.principal, request_id)

    def locate(self, virtual_path: str) -> str:
        """The attachment's file on disk."""
        record = self.store.records.get_attachment(virtual_path)
        return record.disk_path if record is not None else virtual_path

    def elsewhere(self, request_id: str) -> str | None:
        """Nowhere: the run lives in this process."""
        return None

    async def aclose(self) -> None:
        """Stop what still runs, shut the kernel down and close the store."""
        await self.runtime.shutdown()
        await self.kernel.close()
        self.store.close()


class ServerBackend:
    """A run on a Jupyter server, over the run API (REST to act, SSE to follow)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.base = args.server if args.server.endswith("/") else args.server + "/"
        token = args.token if args.token is not None else os.environ.get("JUPYTER_TOKEN", "")
        # The token travels only in this header: never in a URL, a message or a log line.
        headers = {"Authorization": f"token {token}"} if token else {}
        # Reads wait up to 60 s: the server sends a HEARTBEAT every 15 s while a run is quiet.
        timeout = httpx.Timeout(30.0, read=60.0)
        self.http = httpx.AsyncClient(base_url=self.base, headers=headers, timeout=timeout)

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            response = await self.http.post(f"neta/api/agent/run/{path}", json=body)
            if response.status_code >= 400:
                raise CliError(_api_error(response))
            result: dict[str, Any] = response.json()
        except httpx.HTTPError as exc:
            raise CliError(f"cannot reach {self.base}: {type(exc).__name__} {exc}") from exc
        except ValueError as exc:  # a 200 that is not JSON: not a Jupyter server with neta
            raise CliError(f"{self.base} did not answer like a neta_jupyter server") from exc
        return result

    async def start(self) -> str:
        """``POST …/run/async``."""
        args = self.args
        body: dict[str, Any] = {"content": args.prompt, "approve": "auto" if args.yes else "ask"}
        optional = {"model": args.model, "sessionName": args.session, "maxSteps": args.max_steps}
        body.update({key: value for key, value in optional.items() if value is not None})
        return str((await self._post("async", body))["requestId"])

    async def segment(self, request_id: str, after: int) -> AsyncIterator[tuple[int, str]]:
        """Follow the SSE stream, reconnecting with lastEventId until a terminal event."""
        failures = 0
        while True:
            try:
                async for seq, payload, terminal in self._connect(request_id, after):
                    after, failures = seq, 0
                    yield seq, payload
                    if terminal:
                        return
                reason = "the stream ended before the run did"
            except (httpx.TransportError, SSEError) as exc:
                reason = f"{type(exc).__name__}"
            failures += 1
            if failures > RECONNECT_LIMIT:
                raise CliError(f"lost the run's stream ({reason}); requestId {request_id}")
            await asyncio.sleep(min(0.25 * 2**failures, 5.0))

    async def _connect(self, request_id: str, after: int) -> AsyncIterator[tuple[int, str, bool]]:
        """One SSE connection: ``(seq, payload, terminal)``; heartbeats (no id) are dropped."""
        params: dict[str, Any] = {"requestId": request_id}
        if after >= 0:
            params["lastEventId"] = after
        async with aconnect_sse(
            self.http, "GET", "neta/api/agent/run/stream", params=params
        ) as source:
            response = source.response
            if response.status_code == 204:
                return  # the terminal event was already delivered
            if response.status_code >= 400:
                await response.aread()
                raise CliError(_api_error(response))
            async for sse in source.aiter_sse():
                if sse.event == "error":
                    raise CliError(f"the server refused the stream of run {request_id}")
                if not sse.id:
                    continue
                yield int(sse.id), sse.data, sse.event in TERMINAL_EVENT_TYPES

    async def resume(self, request_id: str, ask_id: str, reply: Reply) -> None:
        """``POST …/run/resumeTask``."""
        body = {"requestId": request_id, "askId": ask_id, **_resume_fields(reply)}
        await self._post("resumeTask", body)

    async def terminate(self, request_id: str) -> None:
        """``POST …/run/terminateTask``; a run that already ended is left as it is."""
        with contextlib.suppress(CliError):
            await self._post("terminateTask", {"requestId": request_id})

    def locate(self, virtual_path: str) -> str:
        """The attachment's download URL (open it with the same token)."""
        return f"{self.base}neta/api/agent/attachment/download?virtualPath={quote(virtual_path)}"

    def elsewhere(self, request_id: str) -> str | None:
        """The server's run API."""
        return f"answer run {request_id} through the server's run API (resumeTask with an answer)"

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self.http.aclose()


def _api_error(response: Any) -> str:
    """The message of a run API error body, or the HTTP status when there is none."""
    status = response.status_code
    try:
        body = response.json()
        message = f"{body['message']} ({body.get('errCode')}, HTTP {status})"
    except (ValueError, KeyError, TypeError):
        message = f"HTTP {status} from the server"
    if status in (401, 403):
        # Jupyter answers a bad token with a 403 about XSRF, which points the user elsewhere.
        return f"the server refused the request: {message}; check --token or $JUPYTER_TOKEN"
    return message


def _user_name() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry, e.g. in some containers
        return "cli"
