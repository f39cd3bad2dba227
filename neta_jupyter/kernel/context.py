"""Per-kernel state: the chosen host, the notebook's current session, the runs started here."""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..client import RunRequest
from ..runtime.requests import APPROVE_MODES, Approve
from .discovery import find_server, kernel_id
from .handle import RunHandle
from .host import Host
from .queue import Turn

DEFAULT_SESSION = "default"


def notebook_path(user_ns: dict[str, Any], environ: dict[str, str] | None = None) -> str | None:
    """The notebook's path, when the kernel knows it."""
    env = os.environ if environ is None else environ
    for value in (
        user_ns.get("__session__"),  # ipykernel, from the server's JPY_SESSION_NAME
        user_ns.get("__vsc_ipynb_file__"),  # VS Code
        env.get("JPY_SESSION_NAME"),
    ):
        if isinstance(value, str) and value:
            return value
    return None


def notebook_file(user_ns: dict[str, Any], environ: dict[str, str] | None = None) -> str | None:
    """The notebook a run from this kernel is bound to, if the kernel is a notebook's.

    A console's or a script's kernel has a session named after something else, which the server
    would refuse as a ``notebookPath``.
    """
    path = notebook_path(user_ns, environ)
    return path if path is not None and path.endswith(".ipynb") else None


def default_approve(environ: dict[str, str] | None = None) -> Approve:
    """``ask`` unless ``NETA_APPROVE`` says ``auto`` or ``deny`` (headless notebook runs)."""
    value = (environ if environ is not None else os.environ).get("NETA_APPROVE", "ask")
    return value if value in APPROVE_MODES else "ask"


def notebook_session(user_ns: dict[str, Any], environ: dict[str, str] | None = None) -> str:
    """The name of the notebook's default session: its path."""
    return notebook_path(user_ns, environ) or DEFAULT_SESSION


def choose_host(shell: Any) -> Host:
    """Server mode when a Jupyter server with the extension started this kernel, else embedded."""
    server = find_server()
    if server is not None:
        from .server_host import ServerHost

        return ServerHost(server, kernel_id())
    from .embedded import EmbeddedHost

    return EmbeddedHost(shell)


@dataclass
class KernelContext:
    """What the magics and ``ask`` share within one kernel."""

    shell: Any
    host_override: Host | None = None
    session_override: str | None = None
    """Set by ``--new``: later prompts continue that conversation."""
    handles: dict[str, RunHandle] = field(default_factory=dict)
    last: RunHandle | None = None
    launched: list[RunHandle] = field(default_factory=list)
    """Every run started here, in order (started or still queued)."""
    by_session: dict[str, Turn] = field(default_factory=dict)
    """The latest turn of each conversation (a run, an undo), so the next can queue behind it."""
    last_crew: Any = None
    """The latest crew started here (a :class:`~neta_jupyter.kernel.crew.CrewHandle`)."""
    _host: Host | None = None

    @property
    def host(self) -> Host:
        """The host, chosen on first use."""
        if self._host is None:
            self._host = self.host_override or choose_host(self.shell)
        return self._host

    def session(self) -> str:
        """The session new prompts go to."""
        return self.session_override or notebook_session(self.shell.user_ns)

    def new_session(self) -> str:
        """Start a fresh conversation; it becomes the current one."""
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        # The stamp is for people; the suffix keeps two made within one second apart.
        unique = secrets.token_hex(3)
        self.session_override = f"{notebook_session(self.shell.user_ns)} @ {stamp} #{unique}"
        return self.session_override

    def remember(self, handle: RunHandle) -> None:
        """Keep the handle for ``%neta stop / status / show``."""
        self.last = handle
        if handle.request_id:
            self.handles[handle.request_id] = handle

    def handle_for(self, request_id: str | None) -> RunHandle | None:
        """The handle of a run started here (the last one when no id is given)."""
        if request_id is None:
            return self.last
        found = self.handles.get(request_id)
        if found is None and self.last is not None and self.last.request_id == request_id:
            return self.last
        return found

    def launch(
        self, options: RunRequest, *, display: bool = True, files: Sequence[Path] = ()
    ) -> RunHandle:
        """Create the handle, show it, start the run in the background; returns at once.

        ``files``: local files uploaded and attached to the run as it is created.
        """
        options = options.model_copy(update={"origin": "cell"})
        handle = RunHandle(
            self.host, options.content, options=options, on_start=self.remember, files=files
        )
        self.enqueue(options.session_name or "", handle)
        self.launched.append(handle)
        self.last = handle
        self._go(handle, display)
        return handle

    def enqueue(self, session: str, turn: Turn) -> None:
        """``turn`` goes after what the conversation has not finished yet (see :mod:`.queue`)."""
        previous = self.by_session.get(session)
        if previous is not None and not previous.finished:
            turn.after = previous
        self.by_session[session] = turn

    def attach(self, request_id: str, prompt: str, *, display: bool = True) -> RunHandle:
        """A handle following an existing run."""
        handle = RunHandle(self.host, prompt, request_id=request_id)
        self.remember(handle)
        self._go(handle, display)
        return handle

    def _go(self, handle: RunHandle, display: bool) -> None:
        if _running_loop() is not None:
            if display:
                handle.show()
            handle.begin()
            return
        # Plain terminal IPython has no loop between cells: run on IPython's own loop until the
        # run is at rest, then show the outcome.
        from IPython.core.async_helpers import get_asyncio_loop

        loop = get_asyncio_loop()  # type: ignore[no-untyped-call]
        loop.run_until_complete(handle.wait())
        if display:
            handle.show()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


_context: KernelContext | None = None


def current_context(shell: Any = None) -> KernelContext:
    """The kernel's context (created on first use)."""
    global _context
    if _context is None:
        if shell is None:
            from IPython.core.getipython import get_ipython

            shell = get_ipython()  # type: ignore[no-untyped-call]
        if shell is None:
            raise RuntimeError("neta_jupyter needs IPython: use it in a notebook or in ipython")
        _context = KernelContext(shell)
    return _context
