"""Running kernel tools in a notebook's kernel through the server's kernel manager.

One :class:`ServerKernelBridge` per kernel keeps one client open: a reader task takes every IOPub
message and hands those whose parent is one of our requests to the waiting ``execute``. A busy
kernel simply queues our request; the timeout counts from the moment our code starts running, so
waiting behind the user's own cell never interrupts it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from queue import Empty
from typing import Any

from jupyter_client.session import Session
from jupyter_core.utils import ensure_async

from ..runtime.data.runs import Run
from ..tools.kernel_tools import KernelBusy, KernelOutput, next_wait
from ..tools.registry import KernelBridge
from ..tools.values import ToolError, ToolResult

READY_TIMEOUT = 60.0
"""Seconds to wait for a kernel's first reply before giving up on it."""
BUSY_PATIENCE = 3.0
"""Seconds introspection waits for a busy kernel before reporting it busy."""
STOP_PATIENCE = 10.0
"""Seconds a stopped request that was sent but not yet running is waited for, to interrupt it."""
_POLL = 2.0
"""Seconds between liveness checks while waiting for a kernel."""


_BUSY = "the kernel is busy running a cell, so its variables cannot be read right now"


class _Restarted:
    """Put in a waiting queue when the kernel restarted: its request is gone."""


class ServerKernelBridge:
    """:class:`KernelBridge` over jupyter_server's ``MappingKernelManager`` for one kernel."""

    def __init__(
        self, kernel_manager: Any, kernel_id: str, *, log: logging.Logger | None = None
    ) -> None:
        self._km = kernel_manager
        self.kernel_id = kernel_id
        self._log = log or logging.getLogger("neta_jupyter")
        self._client: Any = None
        self._readers: list[asyncio.Task[None]] = []
        self._waiting: dict[str, asyncio.Queue[dict[str, Any] | _Restarted]] = {}
        self._opening = asyncio.Lock()

    # --- KernelBridge

    async def execute(
        self,
        code: str,
        *,
        timeout: float | None = None,
        on_output: Callable[[str], None] | None = None,
    ) -> ToolResult:
        """Run ``code`` as the user would (outputs collected, no history entry).

        While the user's cell runs, the code waits here rather than in the kernel's queue, so a
        run stopped meanwhile never executes it later.
        """
        await self._idle_within(None)
        return await self._run(code, timeout=timeout, silent=False, on_output=on_output)

    async def execute_cell(
        self,
        code: str,
        *,
        timeout: float | None = None,
        on_output: Callable[[str], None] | None = None,
        on_message: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> ToolResult:
        """Run a notebook cell's ``code`` as the user would, kept in the kernel's history.

        ``on_message`` receives each IOPub message of it (the cell's outputs, its execution
        count), to write them into the notebook as they arrive.
        """
        await self._idle_within(None)
        return await self._run(
            code, timeout=timeout, silent=False, on_output=on_output, on_message=on_message
        )

    async def execute_quietly(self, code: str, *, timeout: float | None = None) -> ToolResult:
        """Run ``code`` silently: no execute_input broadcast, no result display, no history.

        It does not queue behind a running cell in the kernel, where a stopped run could not take
        it back (the tools wait for the cell first, with ``until_idle``).
        """
        if not await self._idle_within(BUSY_PATIENCE):
            raise KernelBusy(_BUSY)
        return await self._run(code, timeout=timeout, silent=True, start_within=BUSY_PATIENCE)

    def is_busy(self) -> bool:
        """Whether a cell is running in the kernel, by the server's account."""
        return bool(getattr(self._kernel(), "execution_state", "idle") == "busy")

    async def until_idle(self, seconds: float | None) -> bool:
        """Wait until no cell runs; False if one still runs after ``seconds`` (None: no limit)."""
        return await self._idle_within(seconds)

    async def close(self) -> None:
        """Stop the reader tasks and the client's channels."""
        for task in self._readers:
            task.cancel()
        await asyncio.gather(*self._readers, return_exceptions=True)
        self._readers = []
        if self._client is not None:
            self._client.stop_channels()
            self._client = None

    # --- internals

    def _kernel(self) -> Any:
        try:
            return self._km.get_kernel(self.kernel_id)
        except KeyError as exc:
            raise ToolError("the notebook's kernel is no longer running") from exc

    async def _open(self) -> Any:
        async with self._opening:
            if self._client is not None:
                return self._client
            kernel = self._kernel()
            # A Session of our own: a shared one would reject, as replays, the IOPub messages
            # that the server's activity watcher or another client already read with it.
            session = Session(
                key=kernel.session.key, signature_scheme=kernel.session.signature_scheme
            )
            client = kernel.client(session=session)
            client.start_channels(shell=True, iopub=True, stdin=False, hb=False, control=False)
            try:
                await _until_ready(client, kernel)
            except ToolError:
                client.stop_channels()
                raise
            self._client = client
            self._readers = [
                asyncio.create_task(self._read(client.get_iopub_msg), name="neta-iopub"),
                asyncio.create_task(self._read(client.get_shell_msg), name="neta-shell"),
            ]
            return client

    async def _read(self, receive: Any) -> None:
        while True:
            try:
                msg = await receive()
            except asyncio.CancelledError:
                raise
            except Exception:  # a malformed message must not end the reader
                self._log.debug("neta: unreadable kernel message", exc_info=True)
                continue
            content = msg.get("content", {})
            if msg.get("msg_type") == "status" and content.get("execution_state") == "starting":
                for waiting in self._waiting.values():
                    waiting.put_nowait(_Restarted())
                continue
            target = self._waiting.get(msg.get("parent_header", {}).get("msg_id", ""))
            if target is not None:
                target.put_nowait(msg)

    async def _idle_within(self, seconds: float | None) -> bool:
        """Whether the kernel is (or becomes) idle within ``seconds``, by the server's account.

        Without a limit, waits as long as the kernel lives.
        """
        began = time.monotonic()
        checked = began
        while getattr(self._kernel(), "execution_state", "idle") == "busy":
            now = time.monotonic()
            if seconds is not None and now - began >= seconds:
                return False
            if now - checked >= _POLL:
                checked = now
                if not await ensure_async(self._kernel().is_alive()):
                    raise ToolError("the notebook's kernel is no longer running")
            await asyncio.sleep(0.1)
        return True

    def _pid(self) -> Any:
        provisioner = getattr(self._kernel(), "provisioner", None)
        return getattr(provisioner, "pid", None)

    async def _run(
        self,
        code: str,
        *,
        timeout: float | None,
        silent: bool,
        on_output: Callable[[str], None] | None = None,
        on_message: Callable[[str, dict[str, Any]], None] | None = None,
        start_within: float | None = None,
    ) -> ToolResult:
        """Send ``code`` and collect what it does.

        With ``start_within``, a request that has not started running by then (a cell sent by
        the user's front end reached the kernel first) is given up with :class:`KernelBusy`; it
        stays queued, which only silent, read-only code may.
        """
        client = await self._open()
        pid = self._pid()
        queue: asyncio.Queue[dict[str, Any] | _Restarted] = asyncio.Queue()
        cell = on_message is not None  # a notebook cell is in the history, like the user's
        flags = {"allow_stdin": False, "stop_on_error": False, "store_history": cell}
        msg_id: str = client.execute(code, silent=silent, **flags)
        self._waiting[msg_id] = queue
        output = KernelOutput(on_stream=on_output)
        started: float | None = None
        sent = time.monotonic()
        try:
            while True:
                msg = await self._next(queue, started, timeout, pid)
                if msg is None:
                    if started is None and self._overtaken(sent, start_within):
                        raise KernelBusy(_BUSY)
                    continue
                match msg.get("msg_type"), msg.get("content", {}):
                    case "status", {"execution_state": "busy"}:
                        started = time.monotonic()
                    case "status", {"execution_state": "idle"}:
                        return output.result()
                    case "execute_reply", {"status": "aborted"}:
                        raise ToolError("the kernel aborted the request (an earlier cell failed)")
                    case msg_type, content:
                        output.iopub(msg_type, content)
                        if on_message is not None:
                            on_message(str(msg_type), content)
        except asyncio.CancelledError:
            # Our code is running, or about to (it went to an idle kernel): stopping the run
            # stops it too, rather than leaving it to run once nobody waits for it.
            running = started is not None
            if not running:
                with contextlib.suppress(TimeoutError):
                    running = await asyncio.wait_for(_until_started(queue), STOP_PATIENCE)
            if running:
                await self._interrupt()
            raise
        finally:
            del self._waiting[msg_id]

    def _overtaken(self, sent: float, patience: float | None) -> bool:
        """Whether another cell holds the kernel ``patience`` seconds after our request was sent."""
        late = patience is not None and time.monotonic() - sent > patience
        return late and self.is_busy()

    async def _next(
        self,
        queue: asyncio.Queue[dict[str, Any] | _Restarted],
        started: float | None,
        timeout: float | None,
        pid: Any,
    ) -> dict[str, Any] | None:
        """The next message for our request; None after a liveness check found nothing wrong."""
        wait = await next_wait(started, timeout, _POLL, self._interrupt)
        try:
            item = await asyncio.wait_for(queue.get(), wait)
        except TimeoutError:
            kernel = self._kernel()
            if not await ensure_async(kernel.is_alive()) or self._pid() != pid:
                raise ToolError("the kernel died or restarted before the code finished") from None
            return None
        if isinstance(item, _Restarted):
            raise ToolError("the kernel restarted before the code finished")
        return item

    async def _interrupt(self) -> None:
        with contextlib.suppress(Exception):
            await ensure_async(self._kernel().interrupt_kernel())


async def _until_started(queue: asyncio.Queue[dict[str, Any] | _Restarted]) -> bool:
    """Whether the kernel started running our request (False: it restarted, or it finished)."""
    while True:
        item = await queue.get()
        if isinstance(item, _Restarted):
            return False
        if item.get("msg_type") == "status":
            state = item.get("content", {}).get("execution_state")
            if state in ("busy", "idle"):
                return bool(state == "busy")


async def _until_ready(client: Any, kernel: Any) -> None:
    """Wait until a kernel_info round trip reaches us, and the server, on IOPub.

    The status messages of our own requests prove our IOPub is subscribed (a message published
    before that would be lost to us). The server's activity watcher, whose account of a running
    cell the tools trust, subscribes when the kernel starts and leaves "starting" on the first
    status it receives: until then a cell started at once could run unseen by it. jupyter_client's
    ``wait_for_ready`` would also wait for IOPub to fall silent, which it never does while another
    client keeps talking to the kernel: a widget view saving its state several times a second kept
    the first tool call of a run waiting for as long as the view stayed open.
    """
    deadline = time.monotonic() + READY_TIMEOUT
    asked: set[str] = set()  # a slow kernel's reply may answer an earlier request
    while time.monotonic() < deadline:
        asked.add(client.kernel_info())
        reply = await _message_for(client.get_shell_msg, asked, 1.0)
        answered = reply is not None and reply.get("msg_type") == "kernel_info_reply"
        if answered and await _message_for(client.get_iopub_msg, asked, 1.0) is not None:
            client._handle_kernel_info_reply(reply)  # adapts to its protocol version
            if getattr(kernel, "execution_state", "idle") != "starting":
                return
        if not await ensure_async(client.is_alive()):
            raise ToolError("the notebook's kernel died before it replied")
    raise ToolError(f"the notebook's kernel did not respond in {READY_TIMEOUT:g} s")


async def _message_for(receive: Any, asked: set[str], seconds: float) -> dict[str, Any] | None:
    """The first message answering one of the ``asked`` requests within ``seconds``."""
    until = time.monotonic() + seconds
    while (left := until - time.monotonic()) > 0:
        try:
            msg: dict[str, Any] = await receive(timeout=left)
        except Empty:
            return None
        if msg.get("parent_header", {}).get("msg_id") in asked:
            return msg
    return None


class ServerKernels:
    """The runtime's kernel factory: a run's ``kernelId`` → the bridge to that kernel."""

    def __init__(self, kernel_manager: Any, *, log: logging.Logger | None = None) -> None:
        self._km = kernel_manager
        self._log = log
        self._bridges: dict[str, ServerKernelBridge] = {}

    def __call__(self, run: Run) -> KernelBridge | None:
        """The bridge for the run's kernel; None without one or once it has shut down."""
        return self.bridge(run.options.kernel_id)

    def bridge(self, kernel_id: str | None) -> KernelBridge | None:
        """The bridge to a kernel of the server; None without one or once it has shut down."""
        running = set(self._km.list_kernel_ids())
        for gone in [kid for kid in self._bridges if kid not in running]:
            _close_later(self._bridges.pop(gone))
        if kernel_id is None or kernel_id not in running:
            return None
        bridge = self._bridges.get(kernel_id)
        if bridge is None:
            bridge = self._bridges[kernel_id] = ServerKernelBridge(
                self._km, kernel_id, log=self._log
            )
        return bridge

    async def close(self) -> None:
        """Close every client (at server shutdown)."""
        bridges, self._bridges = list(self._bridges.values()), {}
        await asyncio.gather(*(b.close() for b in bridges), return_exceptions=True)


_closing: set[asyncio.Task[None]] = set()


def _close_later(bridge: ServerKernelBridge) -> None:
    task = asyncio.ensure_future(bridge.close())
    _closing.add(task)
    task.add_done_callback(_closing.discard)


def kernels_for(serverapp: Any) -> ServerKernels:
    """The kernel factory of a running jupyter server (``Runtime(..., kernels=...)``)."""
    return ServerKernels(serverapp.kernel_manager, log=getattr(serverapp, "log", None))
