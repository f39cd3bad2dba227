"""``neta-jupyter``: run a prompt from the terminal and watch the run live.

The run lives either in an embedded runtime (this process, a SQLite store) or on a Jupyter
server (REST + SSE). Both are a :class:`Backend` yielding the same envelope JSON, which one
renderer draws and one permission callback answers.

Errors::

    CliError        the run could not be started or followed (exit 2); printed, never a traceback
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

import httpx
from httpx_sse import SSEError, aconnect_sse
from jupyter_core.paths import jupyter_data_dir

from . import __version__
from .cli_render import (
    Decision,
    JsonRenderer,
    PermissionPrompter,
    Renderer,
    TerminalRenderer,
    color_enabled,
)
from .events import TERMINAL_EVENT_TYPES, AgentEvent, EventType, PermissionAskData, SuspendType
from .providers import UnknownModel
from .runtime import RunApiError, RunConflict, Runtime, RuntimeConfig
from .store import Store
from .tools.permissions import DEFAULT_RULES, PermissionRule

EXIT_COMPLETED, EXIT_FAILED, EXIT_ERROR, EXIT_SUSPENDED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
_RECONNECT_LIMIT = 8
"""Consecutive reconnects without a new event before giving up on a server stream."""

_EPILOG = """\
exit status: 0 completed, 1 failed, 2 could not start or follow the run,
3 suspended for a reason the terminal cannot answer, 130 interrupted (Ctrl-C cancels the run).

examples:
  neta-jupyter run "what files are here?"
  neta-jupyter run "summarise notes.txt" --ask read_file
  neta-jupyter run "plot sales.csv" --server http://localhost:8888/ --yes
  neta-jupyter run "hello" --json | jq -r .eventType
"""


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

    async def resume(self, request_id: str, ask_id: str, decision: Decision) -> None:
        """Answer the pending permission ask and let the run continue."""
        ...

    async def terminate(self, request_id: str) -> None:
        """Cancel the run (it ends with USER_CANCELLED)."""
        ...

    def locate(self, virtual_path: str) -> str:
        """Where the user can open an attachment."""
        ...

    async def aclose(self) -> None:
        """Release what the backend holds."""
        ...


def default_data_dir() -> Path:
    """``<jupyter data dir>/neta/cli``: the embedded runs' store, apart from the server's."""
    return Path(jupyter_data_dir()) / "neta" / "cli"


class EmbeddedBackend:
    """The runtime in this process, followed through its event log."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        data_dir = Path(args.data_dir or default_data_dir()).expanduser()
        asked = [
            PermissionRule(tool=name, action="ask", description=f"--ask {name}: approval needed")
            for name in args.ask or []
        ]
        config = RuntimeConfig(
            root_dir=Path(args.root or Path.cwd()).expanduser().resolve(),
            data_dir=data_dir,
            permission_rules=[*asked, *DEFAULT_RULES],
        )
        if args.pace is not None:
            config.demo_pace = args.pace
        try:
            data_dir.mkdir(parents=True, exist_ok=True)
            self.store = Store(data_dir / "neta.sqlite3")
        except OSError as exc:
            raise CliError(f"cannot open the run store in {data_dir}: {exc}") from exc
        self.runtime = Runtime(self.store, config)
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
        batches = self.store.events.follow(request_id, after)
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

    async def resume(self, request_id: str, ask_id: str, decision: Decision) -> None:
        """Hand the decision to the runtime."""
        # The terminal event is in the log a moment before the activation has wound down, and
        # the runtime forgets a finished activation only in a done-callback, one tick later.
        while self.runtime.is_active(request_id):
            await self.runtime.wait(request_id)
            await asyncio.sleep(0)
        try:
            await self.runtime.resume(
                self.principal,
                request_id,
                approved=decision.approved,
                ask_id=ask_id,
                always=decision.always,
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

    async def aclose(self) -> None:
        """Stop what still runs and close the store."""
        await self.runtime.shutdown()
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
            if failures > _RECONNECT_LIMIT:
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

    async def resume(self, request_id: str, ask_id: str, decision: Decision) -> None:
        """``POST …/run/resumeTask``."""
        answer = {"approved": decision.approved, "always": decision.always}
        await self._post("resumeTask", {"requestId": request_id, "askId": ask_id, **answer})

    async def terminate(self, request_id: str) -> None:
        """``POST …/run/terminateTask``; a run that already ended is left as it is."""
        with contextlib.suppress(CliError):
            await self._post("terminateTask", {"requestId": request_id})

    def locate(self, virtual_path: str) -> str:
        """The attachment's download URL (open it with the same token)."""
        return f"{self.base}neta/api/agent/attachment/download?virtualPath={quote(virtual_path)}"

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self.http.aclose()


def _api_error(response: Any) -> str:
    """The message of a seed-003 error body, or the HTTP status when there is none."""
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


Decide = Callable[[PermissionAskData], Awaitable[Decision]]


class RunFollower:
    """Starts the run, feeds every envelope to the renderer and answers permission asks."""

    def __init__(self, backend: Backend, renderer: Renderer, decide: Decide) -> None:
        self.backend = backend
        self.renderer = renderer
        self.decide = decide
        self.request_id: str | None = None
        self.last_seq = -1

    async def run(self) -> int:
        """Until the run ends; the exit status."""
        self.request_id = await self.backend.start()
        while True:
            end, ask = await self._segment()
            if end.event_type != EventType.MESSAGE_SUSPENDED:
                return (
                    EXIT_COMPLETED if end.event_type == EventType.MESSAGE_COMPLETED else EXIT_FAILED
                )
            reason = getattr(end.data, "suspend_reason", None)
            if ask is None or reason is None or reason.type != SuspendType.PERMISSION_ASK:
                self.renderer.notice(
                    f"the run waits; resume it through the API ({self.request_id})"
                )
                return EXIT_SUSPENDED
            decision = await self.decide(ask)
            await self.backend.resume(self.request_id, ask.ask_id, decision)

    async def _segment(self) -> tuple[AgentEvent, PermissionAskData | None]:
        """Render one stream segment; its terminal event and the ask it raised, if any."""
        assert self.request_id is not None
        ask: PermissionAskData | None = None
        async for seq, payload in self.backend.segment(self.request_id, self.last_seq):
            self.last_seq = seq
            event = self.renderer.feed(payload)
            self.renderer.flush()
            if event is not None and isinstance(event.data, PermissionAskData):
                ask = event.data
            if event is not None and event.is_terminal:
                return event, ask
        raise CliError(f"the stream of run {self.request_id} ended without a terminal event")

    async def cancel(self) -> int:
        """After Ctrl-C: terminate the run and show how it ended."""
        self.renderer.notice("interrupted: cancelling the run…")
        if self.request_id is not None:
            await self.backend.terminate(self.request_id)
            with contextlib.suppress(CliError, TimeoutError):
                async with asyncio.timeout(10):
                    await self._segment()
        return EXIT_INTERRUPTED


def _on_interrupt(loop: asyncio.AbstractEventLoop, interrupted: asyncio.Event) -> None:
    """First Ctrl-C cancels the run politely; a second one leaves at once."""

    def handle() -> None:
        if interrupted.is_set():
            os._exit(EXIT_INTERRUPTED)
        interrupted.set()

    try:
        loop.add_signal_handler(signal.SIGINT, handle)
    except (NotImplementedError, RuntimeError):  # Windows has no loop signal handlers
        signal.signal(signal.SIGINT, lambda *_: loop.call_soon_threadsafe(handle))


async def run_command(args: argparse.Namespace) -> int:
    """``neta-jupyter run``: the exit status."""
    interrupted = asyncio.Event()
    _on_interrupt(asyncio.get_running_loop(), interrupted)
    backend: Backend = ServerBackend(args) if args.server else EmbeddedBackend(args)
    try:
        renderer: Renderer = (
            JsonRenderer(sys.stdout, sys.stderr)
            if args.json
            else TerminalRenderer(
                sys.stdout, color=color_enabled(sys.stdout), locate_attachment=backend.locate
            )
        )
        follower = RunFollower(
            backend, renderer, PermissionPrompter(renderer, sys.stdin, assume_yes=args.yes)
        )
        task = asyncio.create_task(follower.run())
        stop = asyncio.create_task(interrupted.wait())
        try:
            await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if task.done():
            return task.result()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return await follower.cancel()
    finally:
        await backend.aclose()


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    parser = argparse.ArgumentParser(
        prog="neta-jupyter",
        description="neta_jupyter: an AI agent for Jupyter, from the terminal.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = commands.add_parser(
        "run",
        help="run a prompt and show the agent's work live",
        description="Run a prompt and render the run as it happens: reasoning (dimmed), the\n"
        "answer, one card per tool call, progress and notices. Tool calls that need\n"
        "approval are asked about on the terminal.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_run_options(run)
    return parser


def _add_run_options(run: argparse.ArgumentParser) -> None:
    """Options of ``run``, grouped by where the run lives."""
    run.add_argument("prompt", help="what to ask the agent")
    run.add_argument(
        "--model",
        help="model as provider:model (default: the configured one, "
        "'demo' offline; 'scripted:FILE.json' plays a script)",
    )
    run.add_argument(
        "--yes", "-y", action="store_true", help="approve every tool call without asking"
    )
    run.add_argument("--max-steps", type=int, metavar="N", help="model calls the run may make")
    run.add_argument(
        "--session", metavar="NAME", help="continue the named session (default: a new session)"
    )
    run.add_argument(
        "--json", action="store_true", help="print each event envelope as one JSON line instead"
    )
    local = run.add_argument_group("embedded runtime (without --server)")
    local.add_argument("--root", metavar="DIR", help="folder the agent may read (default: .)")
    local.add_argument(
        "--data-dir", metavar="DIR", help=f"where runs are stored (default: {default_data_dir()})"
    )
    local.add_argument(
        "--pace",
        type=float,
        metavar="SECONDS",
        help="seconds between the demo model's tokens (0: as fast as possible)",
    )
    local.add_argument(
        "--ask",
        action="append",
        metavar="TOOL",
        help="ask before every call of TOOL (repeatable), e.g. --ask read_file",
    )
    remote = run.add_argument_group("on a Jupyter server")
    remote.add_argument(
        "--server",
        metavar="URL",
        help="follow the run on this Jupyter server, e.g. http://localhost:8888/",
    )
    remote.add_argument("--token", metavar="T", help="the server's token (default: $JUPYTER_TOKEN)")


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Reject option combinations that would be silently ignored."""
    if args.server:
        local = [
            f"--{name.replace('_', '-')}"
            for name in ("root", "data_dir", "pace", "ask")
            if getattr(args, name) is not None
        ]
        if local:
            parser.error(f"{', '.join(local)} only apply to the embedded runtime, not --server")
    elif args.token is not None:
        parser.error("--token needs --server")
    if args.root is not None and not Path(args.root).expanduser().is_dir():
        parser.error(f"--root {args.root!r} is not a folder")
    if args.max_steps is not None and args.max_steps < 1:
        parser.error("--max-steps must be at least 1")
    if args.pace is not None and args.pace < 0:
        parser.error("--pace must not be negative")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``neta-jupyter`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    _check(parser, args)
    # Cards use a few symbols (▸ ✓ ✗); a terminal that cannot show them gets '?' instead.
    with contextlib.suppress(AttributeError, ValueError):
        sys.stdout.reconfigure(errors="replace")  # type: ignore[union-attr]
    try:
        return asyncio.run(run_command(args))
    except CliError as exc:
        print(f"neta-jupyter: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, and keep Python's exit-time flush
        # of stdout from raising again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
