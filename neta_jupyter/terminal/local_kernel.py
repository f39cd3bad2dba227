"""A Python kernel of the terminal session: where ``python`` and the variable tools run.

``neta-jupyter run`` without a server has no notebook kernel, so it starts one of its own with
jupyter_client (the ``python3`` kernel, which is ipykernel in this Python), in the root folder,
the first time a tool needs to run code, and shuts it down when the command ends. Asking about
variables before that needs no kernel: a kernel that has not started holds none, and the
introspection is answered for an empty namespace rather than starting a kernel to say so.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import queue
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from jupyter_client.manager import AsyncKernelManager

from ..tools.kernel_tools import KernelOutput, next_wait
from ..tools.values import ToolError, ToolResult

READY_TIMEOUT = 60.0
"""Seconds a starting kernel may take to answer its first request."""
_POLL = 2.0
"""Seconds between liveness checks while code runs."""


class LocalKernel:
    """:class:`~neta_jupyter.tools.KernelBridge` over a kernel this process starts when needed."""

    def __init__(self, cwd: Path, *, log_file: Path | None = None, kernel_name: str = "python3"):
        self.cwd = cwd
        self.kernel_name = kernel_name
        self._log_path = log_file
        self._log: IO[bytes] | None = None
        self._manager: AsyncKernelManager | None = None
        self._client: Any = None
        self._lock = asyncio.Lock()

    @property
    def started(self) -> bool:
        """Whether the kernel process was started (and not shut down since)."""
        return self._client is not None

    async def execute(
        self,
        code: str,
        *,
        timeout: float | None = None,
        on_output: Callable[[str], None] | None = None,
    ) -> ToolResult:
        """Run ``code`` in the kernel (started now if need be) and collect its outputs."""
        async with self._lock:
            client = await self._ensure_started()
            return await self._run(client, code, timeout=timeout, silent=False, on_output=on_output)

    async def execute_cell(
        self,
        code: str,
        *,
        timeout: float | None = None,
        on_output: Callable[[str], None] | None = None,
        on_message: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> ToolResult:
        """Run a notebook cell's ``code``; ``on_message`` gets each IOPub message (its outputs)."""
        async with self._lock:
            client = await self._ensure_started()
            return await self._run(
                client,
                code,
                timeout=timeout,
                silent=False,
                on_output=on_output,
                on_message=on_message,
            )

    async def execute_quietly(self, code: str, *, timeout: float | None = None) -> ToolResult:
        """Run introspection ``code`` without a trace in the kernel's history."""
        async with self._lock:
            if self._client is None:
                return _in_empty_namespace(code)
            return await self._run(self._client, code, timeout=timeout, silent=True)

    async def close(self) -> None:
        """Shut the kernel down, if it was started."""
        async with self._lock:
            client, manager, self._client, self._manager = self._client, self._manager, None, None
            if client is not None:
                client.stop_channels()
            if manager is not None:
                with contextlib.suppress(Exception):  # it may have died already
                    await manager.shutdown_kernel(now=True)
            if self._log is not None:
                self._log.close()
                self._log = None

    # --- internals

    async def _ensure_started(self) -> Any:
        if self._client is not None:
            if self._manager is not None and await self._manager.is_alive():
                return self._client
            raise ToolError("the local kernel died; start the command again for a fresh one")
        manager = AsyncKernelManager(kernel_name=self.kernel_name)
        # The kernel writes its own diagnostics; on the terminal they would tear the display.
        output: int | IO[bytes] = subprocess.DEVNULL
        if self._log_path is not None:
            with contextlib.suppress(OSError):
                self._log = output = self._log_path.open("wb")
        try:
            await manager.start_kernel(cwd=str(self.cwd), stdout=output, stderr=output)
        except Exception as exc:
            raise ToolError(f"could not start a local Python kernel: {exc}") from exc
        client = manager.client()
        client.start_channels()
        try:
            await client.wait_for_ready(timeout=READY_TIMEOUT)
        except RuntimeError as exc:
            client.stop_channels()
            await manager.shutdown_kernel(now=True)
            raise ToolError(f"the local Python kernel did not start: {exc}") from exc
        self._manager, self._client = manager, client
        return client

    async def _run(
        self,
        client: Any,
        code: str,
        *,
        timeout: float | None,
        silent: bool,
        on_output: Callable[[str], None] | None = None,
        on_message: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> ToolResult:
        msg_id = client.execute(
            code, silent=silent, store_history=False, allow_stdin=False, stop_on_error=False
        )
        output = KernelOutput(on_stream=on_output)
        began = time.monotonic()
        try:
            while True:
                msg = await self._next(client, began, timeout)
                if msg is None or msg.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                match msg.get("msg_type"), msg.get("content", {}):
                    case "status", {"execution_state": "idle"}:
                        return output.result()
                    case msg_type, content:
                        output.iopub(msg_type, content)
                        if on_message is not None:
                            on_message(msg_type, content)
        except asyncio.CancelledError:
            await self._interrupt()  # the run was stopped: so is its code
            raise

    async def _next(self, client: Any, began: float, timeout: float | None) -> Any:
        """The next IOPub message; None after a liveness check found nothing wrong."""
        wait = await next_wait(began, timeout, _POLL, self._interrupt)
        try:
            return await client.get_iopub_msg(timeout=wait)
        except queue.Empty:
            if self._manager is None or not await self._manager.is_alive():
                raise ToolError("the local kernel died before the code finished") from None
            return None

    async def _interrupt(self) -> None:
        if self._manager is not None:
            with contextlib.suppress(Exception):
                await self._manager.interrupt_kernel()


def _in_empty_namespace(code: str) -> ToolResult:
    """What a kernel with no variables prints for the introspection ``code``."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "<neta-introspection>", "exec"), {"__name__": "__main__"})
    return ToolResult(output=printed.getvalue())
