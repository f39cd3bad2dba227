"""Where a terminal run lives: the runtime embedded in this process, or a Jupyter server.

Both are a :class:`Backend` over one run-API client (:mod:`neta_jupyter.client`: in-process or
over HTTP), so one follower drives either, one renderer draws either and one asker answers either.

Errors::

    CliError        the run could not be started or followed (exit 2); printed, never a traceback
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import os
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from jupyter_core.paths import jupyter_data_dir
from pydantic import ValidationError

from ..client import (
    ClientError,
    HttpTransport,
    InProcessTransport,
    Received,
    Refused,
    RunClient,
    RunRequest,
    Unauthorized,
    attachment_sources,
)
from ..client.mistakes import EMPTY_PROMPT, describe_request
from ..providers import load_script
from ..runtime import reads
from ..runtime.requests import AttachmentRef
from ..runtime.settings import build_runtime
from ..store import StorageDamaged, StorageError, Store, finish_now
from ..store.health import DB_NAME, recovery_steps
from .config import ConfigError, load_settings
from .local_kernel import LocalKernel
from .prompts import Answer, Reply


class CliError(Exception):
    """The run could not be started or followed; the message is shown as is."""


def default_data_dir() -> Path:
    """``<jupyter data dir>/neta/cli``: the embedded runs' store, apart from the server's."""
    return Path(jupyter_data_dir()) / "neta" / "cli"


def run_request(args: argparse.Namespace) -> RunRequest:
    """The run the command line asks for, wherever it lives.

    A flag whose name is a run option's (``--max-steps`` → ``max_steps``) sets that option, so a
    run option needs only its flag in ``cli.py``.
    """
    if not args.prompt.strip():
        raise CliError(EMPTY_PROMPT)
    fields: dict[str, Any] = {
        "content": args.prompt,
        "session_name": args.session,
        "approve": "auto" if args.yes else "ask",
        "origin": "terminal",
    }
    for name in RunRequest.model_fields.keys() - fields.keys():
        if getattr(args, name, None) is not None:
            fields[name] = getattr(args, name)
    fields["attachments"] = attached(args)[0] or None
    try:
        return RunRequest.model_validate(fields)
    except ValidationError as exc:
        raise CliError(describe_request(exc)) from exc


def attached(args: argparse.Namespace) -> tuple[list[AttachmentRef], list[Path]]:
    """The URLs and the local files ``--attach`` names."""
    try:
        return attachment_sources(getattr(args, "attach", None) or [])
    except ValueError as exc:
        raise CliError(str(exc)) from exc


def _cli_error(exc: ClientError) -> CliError:
    """What the user reads: the run API's message and code, and what to check."""
    if isinstance(exc, Unauthorized):
        # Jupyter answers a bad token with a 403 about XSRF, which points the user elsewhere.
        return CliError(
            f"the server refused the request: {exc.message} ({exc.code}, HTTP {exc.status}); "
            "check --token or $JUPYTER_TOKEN"
        )
    if isinstance(exc, Refused):
        return CliError(f"{exc.message} ({exc.code})")
    return CliError(exc.message)


def _resume_fields(reply: Reply) -> dict[str, Any]:
    if isinstance(reply, Answer):
        return {"answer": reply.text}
    return {"approved": reply.approved, "always": reply.always}


class Backend:
    """The run the command asks for, through a run-API client: start, follow, answer, stop."""

    def __init__(self, client: RunClient, request: RunRequest, files: list[Path]) -> None:
        self.client = client
        self.request = request
        self.files = files
        """Local files uploaded and attached as the run starts."""

    async def start(self) -> str:
        """Start the run; its requestId."""
        try:
            return (await self.client.start(self.request, self.files)).request_id
        except ClientError as exc:
            raise _cli_error(exc) from exc

    async def segment(self, request_id: str, after: int) -> AsyncGenerator[Received, None]:
        """Events after ``after``, up to and including a terminal event."""
        try:
            async for item in self.client.follow(request_id, after):
                yield item
        except ClientError as exc:
            raise _cli_error(exc) from exc

    async def resume(self, request_id: str, ask_id: str, reply: Reply) -> None:
        """Answer the pending ask or question and let the run continue."""
        try:
            await self.client.resume(request_id, ask_id=ask_id, **_resume_fields(reply))
        except ClientError as exc:
            raise _cli_error(exc) from exc

    async def terminate(self, request_id: str) -> None:
        """Cancel the run (it ends with USER_CANCELLED); one that already ended is left as is."""
        with contextlib.suppress(ClientError):
            await self.client.terminate(request_id)

    def locate(self, virtual_path: str) -> str:
        """Where the user can open an attachment."""
        return virtual_path

    def elsewhere(self, request_id: str) -> str | None:
        """Where else a waiting run can be answered, when not here."""
        return None

    async def aclose(self) -> None:
        """Release what the backend holds."""
        await self.client.aclose()


class EmbeddedBackend(Backend):
    """The runtime in this process, with the server's settings, followed through its event log.

    Kernel tools run in a :class:`LocalKernel`, started at the first call that needs it.
    """

    def __init__(self, args: argparse.Namespace) -> None:
        request = run_request(args)
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
            # The folder is kept from one command to the next: old runs' events go as on a server.
            self.store = Store(data_dir / "neta.sqlite3", event_retention=settings.event_retention)
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
        if args.model and args.model.startswith("scripted:"):
            self._pin_script(args.model)
        self._principal = _user_name()
        client = RunClient(InProcessTransport(self.runtime, self._principal))
        super().__init__(client, request, attached(args)[1])

    def _pin_script(self, spec: str) -> None:
        """Load the script named on the command line once, as its user may read any of their files.

        Once, so a resumed run continues it instead of replaying it.
        """
        path = Path(spec.removeprefix("scripted:")).expanduser().absolute()
        try:
            self.runtime.models.register(spec, load_script(path.parent, path.name))
        except ValueError as exc:
            raise CliError(f"cannot load the scripted model: {exc}") from exc

    def locate(self, virtual_path: str) -> str:
        """The attachment's file on disk."""
        record = finish_now(reads.attachment(self.runtime, self._principal, virtual_path))
        return record.disk_path if record is not None else virtual_path

    async def aclose(self) -> None:
        """Stop what still runs, shut the kernel down and close the store."""
        await super().aclose()
        await self.runtime.shutdown()
        await self.kernel.close()
        self.store.close()


class ServerBackend(Backend):
    """A run on a Jupyter server, over the run API (REST to act, SSE to follow)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.base = args.server if args.server.endswith("/") else args.server + "/"
        token = args.token if args.token is not None else os.environ.get("JUPYTER_TOKEN", "")
        # The token travels only in this header: never in a URL, a message or a log line.
        headers = {"Authorization": f"token {token}"} if token else {}
        # Reads wait up to 60 s: the server sends a HEARTBEAT every 15 s while a run is quiet.
        transport = HttpTransport(
            self.base, headers=headers, timeout=httpx.Timeout(30.0, read=60.0)
        )
        super().__init__(RunClient(transport), run_request(args), attached(args)[1])

    def locate(self, virtual_path: str) -> str:
        """The attachment's download URL (open it with the same token)."""
        return f"{self.base}neta/api/agent/attachment/download?virtualPath={quote(virtual_path)}"

    def elsewhere(self, request_id: str) -> str | None:
        """The server's run API."""
        return f"answer run {request_id} through the server's run API (resumeTask with an answer)"


def _user_name() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry, e.g. in some containers
        return "cli"
