"""``run_cell``: a notebook cell runs in the notebook's kernel, its outputs land in the cell.

The outputs are written into the cell as they arrive, the way the user's own run of the cell
would show them, and come back to the model as the ``python`` tool's do: text, an error with its
traceback, images (``ToolResult.images``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from typing import Annotated, Any, Protocol, runtime_checkable

from pydantic import Field

from .executions import ExecutionProgress, in_background
from .kernel_tools import NOTHING_PRINTED, _kernel_of, _wait_for_kernel
from .notebook_call import CellId, notebook_of
from .notebook_doc import NotebookError, NotebookHost, find, shown, source_text
from .registry import KernelBridge, ToolContext, tool
from .values import ToolError, ToolFile, ToolResult

FLUSH_EVERY = 0.3
"""Seconds between writes of a running cell's outputs into the notebook."""


@runtime_checkable
class CellKernel(Protocol):
    """A bridge that also hands over each output message (the server's kernels)."""

    async def execute_cell(
        self,
        code: str,
        *,
        timeout: float | None = None,
        on_output: Callable[[str], None] | None = None,
        on_message: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> ToolResult:
        """Execute ``code`` as a cell (in the history); ``on_message``: each IOPub message."""
        ...


class CellOutputs:
    """A cell's outputs built from the kernel's messages and written into it, throttled."""

    def __init__(self, host: NotebookHost, cell_id: str) -> None:
        self._host = host
        self._cell_id = cell_id
        self.outputs: list[dict[str, Any]] = []
        self.count: int | None = None
        self._dirty = False
        self._flushing: asyncio.Task[None] | None = None
        self._last = 0.0

    def message(self, msg_type: str, content: dict[str, Any]) -> None:
        """One IOPub message of the execution."""
        match msg_type, content:
            case "execute_input", {"execution_count": int(count)}:
                self.count = count
            case "stream", {"name": str(name), "text": text}:
                last = self.outputs[-1] if self.outputs else None
                if last and last.get("output_type") == "stream" and last.get("name") == name:
                    last["text"] = source_text(last["text"]) + source_text(text)
                else:
                    self.outputs.append({"output_type": "stream", "name": name, "text": text})
            case ("display_data" | "execute_result") as kind, {"data": dict(data)}:
                metadata = content.get("metadata", {})
                output = {"output_type": kind, "data": data, "metadata": metadata}
                if kind == "execute_result":
                    output["execution_count"] = content.get("execution_count", self.count)
                self.outputs.append(output)
            case "error", _:
                keys = ("ename", "evalue", "traceback")
                self.outputs.append({"output_type": "error"} | {k: content.get(k) for k in keys})
            case "clear_output", _:
                self.outputs = []
            case _:
                return
        self._dirty = True
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.ensure_future(self._later())

    async def _later(self) -> None:
        await asyncio.sleep(max(0.0, self._last + FLUSH_EVERY - time.monotonic()))
        await self.flush()

    async def flush(self, *, running: bool = True) -> None:
        """Write what arrived into the cell (a cell deleted meanwhile is left alone)."""
        if not self._dirty:
            return
        self._dirty, self._last = False, time.monotonic()
        try:
            async with self._host.open() as cells:
                index = find(cells, self._cell_id)
                cells.set_outputs(index, [dict(o) for o in self.outputs], self.count)
                cells.set_running(index, running)
        except NotebookError:
            return

    async def open(self) -> None:
        """The execution starts: the cell's old outputs go, and it shows as running."""
        self._dirty = True
        await self.flush()

    async def close(self) -> None:
        """The execution ended: the last outputs go in (after a write under way)."""
        if self._flushing is not None:
            await asyncio.gather(self._flushing, return_exceptions=True)
        self._dirty = True
        await self.flush(running=False)


async def _cell_source(host: NotebookHost, cell_id: str) -> str:
    try:
        async with host.open() as cells:
            cell = cells.cell(find(cells, cell_id))
    except NotebookError as exc:
        raise ToolError(str(exc)) from exc
    if cell.get("cell_type") != "code":
        raise ToolError(f"cell {cell_id} is a {cell.get('cell_type')} cell; only code cells run")
    return source_text(cell.get("source"))


async def _approved_source(ctx: ToolContext, host: NotebookHost, cell_id: str) -> str:
    """The code to run: the cell's source, refused when it is not what the user approved."""
    code = await _cell_source(host, cell_id)
    if ctx.approved is not None and not ctx.approved(code):
        raise ToolError(
            f"cell {cell_id} changed after you were asked to approve running it, so it was not "
            "run; run it again to be asked about the code it holds now"
        )
    return code


@tool(host="notebook")
async def run_cell(
    ctx: ToolContext,
    cell_id: CellId,
    background: Annotated[
        bool,
        Field(
            description="true for a cell that takes minutes (training, a long download): the "
            "run waits without holding the conversation and goes on by itself when it ends"
        ),
    ] = False,
) -> ToolResult:
    """Run a code cell of the user's notebook in its kernel, as if the user ran it.

    Its outputs appear in the notebook and come back to you: printed text, the error with its
    traceback, and figures as images.
    """
    host = notebook_of(ctx).host
    kernel = _kernel_of(ctx)
    if background:
        # Run again once the cell ended: its result is waiting, whatever the cell says now.
        resumed = ctx.scope is not None and ctx.scope.resumed
        code = "" if resumed else await _approved_source(ctx, host, cell_id)
        message = f"Running cell {cell_id} in the background: the run goes on when it ends"
        if not resumed:
            ctx.report(message)
        return await in_background(
            ctx, message, lambda limit: _execute(ctx, kernel, cell_id, code, limit, None)
        )
    return await run_code(ctx, cell_id, await _approved_source(ctx, host, cell_id))


async def run_code(ctx: ToolContext, cell_id: str, code: str) -> ToolResult:
    """Run ``code``, the source of the cell ``cell_id``, in the kernel, its outputs in the cell."""
    kernel = _kernel_of(ctx)
    await _wait_for_kernel(ctx, kernel, None)
    title = f"Running cell {cell_id}"
    ctx.report(title)
    async with ExecutionProgress(ctx, title) as progress:
        try:
            return await _execute(
                ctx, kernel, cell_id, code, ctx.execution_timeout, progress.output
            )
        except ToolError as exc:
            raise CellFailed(cell_id, str(exc)) from exc


class CellFailed(ToolError):
    """The cell ran and raised (the error is in the notebook under it too)."""

    def __init__(self, cell_id: str, error: str) -> None:
        super().__init__(f"{error}\n{_fix_hint(cell_id)}")
        self.error = error
        """The error as the kernel told it, its traceback included."""
        lines = [line for line in error.splitlines() if line.strip()]
        self.summary = lines[-1].strip() if lines else "an error"
        """Its last line: ``KeyError: 'revenu'``."""


def _fix_hint(cell_id: str) -> str:
    return (
        f"Cell {cell_id} failed; its error is under it in the notebook. To fix it, call "
        f'edit_cell {{"cell_id": "{cell_id}", "source": <the corrected whole source>, '
        '"run": true}.'
    )


async def _execute(
    ctx: ToolContext,
    kernel: KernelBridge,
    cell_id: str,
    code: str,
    timeout: float | None,
    on_output: Callable[[str], None] | None,
) -> ToolResult:
    """``run_cell``'s result of running the cell's ``code``, its outputs written into it."""
    outputs = CellOutputs(notebook_of(ctx).host, cell_id)
    await outputs.open()
    try:
        if isinstance(kernel, CellKernel):
            result = await kernel.execute_cell(
                code, timeout=timeout, on_output=on_output, on_message=outputs.message
            )
        else:
            result = await kernel.execute(code, timeout=timeout, on_output=on_output)
            outputs.message("stream", {"name": "stdout", "text": result.output})
    finally:
        await outputs.close()
    prefix = f"{ctx.tool_call_id}-{cell_id}"
    result.images = [dataclasses.replace(f, name=f"{prefix}-{f.name}") for f in result.images]
    result.files = [_renamed(f, prefix) for f in result.files]
    if not result.output.strip():
        result.output = NOTHING_PRINTED
    return result


def _renamed(file: ToolFile, prefix: str) -> ToolFile:
    return dataclasses.replace(file, name=f"{prefix}-{file.name}")


async def run_preview(ctx: ToolContext, arguments: dict[str, Any]) -> dict[str, Any] | None:
    """The code a ``run_cell`` call would run, for its permission prompt."""
    cell_id = str(arguments.get("cell_id"))
    source = await _cell_source(notebook_of(ctx).host, cell_id)
    return {"kind": "code", "cellId": cell_id, "text": shown(source)}
