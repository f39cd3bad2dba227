"""Tools that run in the notebook's kernel: ``python``, ``list_variables``, ``inspect_variable``.

Each builds a code string and hands it to the :class:`KernelBridge` of the host (the server's
kernel manager, or the kernel itself in embedded mode). :class:`KernelOutput` turns what a kernel
produced (streams, rich displays, errors) into a :class:`ToolResult`; both bridges use it, so the
model sees the same text whichever host ran the code.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, Protocol, runtime_checkable

from pydantic import Field

from .executions import ExecutionProgress, in_background
from .introspection import (
    AS_OF_PROMPT,
    introspection_answer,
    introspection_code,
    listed,
)
from .registry import KernelBridge, Tool, ToolContext, tool
from .values import ToolError, ToolFile, ToolResult

MAX_OUTPUT_CHARS = 20_000
"""Characters of output the model receives; the whole output is attached beyond that."""
MAX_ERROR_CHARS = 8_000
"""Characters of a failed execution's report (the end of a traceback matters most)."""
MAX_KEPT_CHARS = 2_000_000
"""Output kept in memory per execution; a runaway print loop is cut here."""
INTROSPECTION_TIMEOUT = 60.0
NOTHING_PRINTED = "(the code ran and printed nothing; print() the values you want to see)"
"""The ``python`` tool's result when the code printed and displayed nothing."""
WAITING_FOR_KERNEL = "Waiting for the kernel: a cell is running"
RUNNING_PYTHON = "Running Python in your kernel"
IN_BACKGROUND = "Running Python in the background: the run goes on when it ends"

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")
_IMAGE_TYPES = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif"}


def strip_ansi(text: str) -> str:
    """Text without terminal colour codes."""
    return _ANSI.sub("", text)


def _settle_carriage_returns(text: str) -> str:
    """What a terminal shows: a line rewritten with carriage returns keeps its last state."""
    if "\r" not in text:
        return text
    return "\n".join(line.rsplit("\r", 1)[-1] for line in text.replace("\r\n", "\n").split("\n"))


class KernelBusy(ToolError):
    """The kernel ran a cell of the user's before our quiet request could start."""


@runtime_checkable
class QuietKernel(Protocol):
    """A bridge that can also run code without side effects the user would see (no history)."""

    async def execute_quietly(self, code: str, *, timeout: float | None = None) -> ToolResult:
        """Execute ``code`` silently and collect its output."""
        ...


@runtime_checkable
class BusyKernel(Protocol):
    """A bridge that knows when the user's own cell is running (the server's kernels)."""

    def is_busy(self) -> bool:
        """Whether a cell is running in the kernel now."""
        ...

    async def until_idle(self, seconds: float | None) -> bool:
        """Wait until no cell runs; False if one still runs after ``seconds`` (None: no limit)."""
        ...


async def next_wait(
    started: float | None,
    timeout: float | None,
    poll: float,
    interrupt: Callable[[], Awaitable[None]],
) -> float:
    """Seconds to wait for a kernel's next message: ``poll``, less as the code's time runs out.

    Once the code has run ``timeout`` seconds since ``started`` (monotonic; ``None``: not yet
    running), the kernel is interrupted and the call fails.
    """
    if started is None or timeout is None:
        return poll
    left = started + timeout - time.monotonic()
    if left <= 0:
        await interrupt()
        raise ToolError(f"the code ran longer than {timeout:g} s, so the kernel was interrupted")
    return min(poll, left)


class KernelOutput:
    """Collects one execution's outputs, in order, from either host."""

    def __init__(
        self, *, limit: int = MAX_OUTPUT_CHARS, on_stream: Callable[[str], None] | None = None
    ) -> None:
        self._limit = limit
        self._on_stream = on_stream
        self._parts: list[str] = []
        self._size = 0
        self._dropped = 0
        self.images: list[ToolFile] = []
        self.error: str | None = None

    def stream(self, text: str) -> None:
        """Text written to stdout or stderr (also handed on as it comes, when asked)."""
        clean = strip_ansi(text)
        self._add(clean)
        if self._on_stream is not None:
            self._on_stream(clean)

    def rich(self, bundle: dict[str, Any]) -> None:
        """A display or a result: images become files, the rest is read as text."""
        image = next((m for m in _IMAGE_TYPES if m in bundle), None)
        if image is not None and (data := _image_bytes(bundle[image])) is not None:
            name = f"figure-{len(self.images) + 1}.{_IMAGE_TYPES[image]}"
            self.images.append(ToolFile(name, data, image))
            self._add(f"[image: {name}]\n")
            return
        text = bundle.get("text/plain")
        if isinstance(text, list):
            text = "".join(text)
        if isinstance(text, str) and text:
            self._add(strip_ansi(text).rstrip("\n") + "\n")
        elif bundle:
            self._add(f"[display: {', '.join(sorted(bundle))}]\n")

    def fail(self, ename: str, evalue: str, traceback: list[str]) -> None:
        """The code raised."""
        lines = [strip_ansi(line) for line in traceback] or [f"{ename}: {evalue}"]
        report = "\n".join(lines).strip("\n")
        if f"{ename}: {evalue}" not in report:
            report += f"\n{ename}: {evalue}"
        self.error = report

    def iopub(self, msg_type: object, content: Any) -> None:
        """One IOPub message of the execution from a kernel over the wire: its output, if any."""
        match msg_type, content:
            case "stream", {"text": str(text)}:
                self.stream(text)
            case (("display_data" | "execute_result"), {"data": dict(bundle)}):
                self.rich(bundle)
            case "error", _:
                self.fail(
                    str(content.get("ename", "Error")),
                    str(content.get("evalue", "")),
                    [str(line) for line in content.get("traceback", [])],
                )

    @property
    def text(self) -> str:
        """Everything printed or displayed, as the model reads it."""
        text = _settle_carriage_returns("".join(self._parts))
        if self._dropped:
            text += f"\n… [{self._dropped} more characters were not kept]"
        return text

    def result(self) -> ToolResult:
        """The tool result; a :class:`ToolError` carrying the output and traceback on failure."""
        text = self.text
        if self.error is not None:
            shown = text[-(MAX_ERROR_CHARS // 2) :] if text.strip() else ""
            report = (shown.rstrip("\n") + "\n" if shown else "") + self.error
            if len(report) > MAX_ERROR_CHARS:
                report = "… " + report[-MAX_ERROR_CHARS:]
            raise ToolError(report)
        if len(text) <= self._limit:
            return ToolResult(text, images=list(self.images))
        full = ToolFile("output.txt", text.encode(), "text/plain")
        note = f"\n… [output truncated: {len(text):,} characters in all; the whole is attached]"
        return ToolResult(text[: self._limit] + note, files=[full], images=list(self.images))

    def _add(self, text: str) -> None:
        room = MAX_KEPT_CHARS - self._size
        if room <= 0:
            self._dropped += len(text)
            return
        self._parts.append(text[:room])
        self._size += min(len(text), room)
        self._dropped += max(0, len(text) - room)


def _image_bytes(value: Any) -> bytes | None:
    if isinstance(value, bytes):
        return value
    if isinstance(value, list):
        value = "".join(value)
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value)
    except (binascii.Error, ValueError):
        return None


async def _wait_for_kernel(ctx: ToolContext, kernel: KernelBridge, limit: float | None) -> None:
    """While the user's cell runs, say so on the tool card and wait (up to ``limit`` seconds)."""
    if not isinstance(kernel, BusyKernel) or not kernel.is_busy():
        return
    ctx.report(WAITING_FOR_KERNEL)
    if not await kernel.until_idle(limit):
        raise ToolError(
            f"the kernel was still running a cell after {limit:g} s, so it could not be read; "
            "try again once the cell has finished"
        )


async def _introspect(ctx: ToolContext, name: str | None) -> dict[str, Any]:
    kernel = _kernel_of(ctx)
    await _wait_for_kernel(ctx, kernel, ctx.kernel_wait)
    code = introspection_code(name)
    if isinstance(kernel, QuietKernel):
        result = await kernel.execute_quietly(code, timeout=INTROSPECTION_TIMEOUT)
    else:
        result = await kernel.execute(code, timeout=INTROSPECTION_TIMEOUT)
    return introspection_answer(result.output)


def _kernel_of(ctx: ToolContext) -> KernelBridge:
    if ctx.kernel is None:
        raise ToolError("no kernel is attached to this run, so code cannot run")
    return ctx.kernel


# --- the tools


@tool(host="kernel")
async def python(
    ctx: ToolContext,
    code: Annotated[str, Field(description="Python code to run in the notebook's kernel")],
    background: Annotated[
        bool,
        Field(
            description="true for code that takes minutes (training, a long download): the run "
            "waits without holding the conversation and goes on by itself when the code ends"
        ),
    ] = False,
) -> ToolResult:
    """Run Python code in the user's notebook kernel and return what it printed and displayed.

    Use it to compute (sums, counts, means, filters: pandas reads a CSV with pd.read_csv),
    to change data or to plot; print() the values you need. The code sees and changes the
    user's variables. Figures shown with matplotlib (plt.show()) come back as images. Not for
    reading what a file says (read_file) or listing variables (list_variables).
    """
    kernel = _kernel_of(ctx)
    if background:
        if ctx.scope is None or not ctx.scope.resumed:
            ctx.report(IN_BACKGROUND)
        return await in_background(
            ctx, IN_BACKGROUND, lambda limit: _execute(ctx, kernel, code, limit, None)
        )
    await _wait_for_kernel(ctx, kernel, None)  # as long as the run may: the user approved it
    ctx.report(RUNNING_PYTHON)
    # The user watches long output arrive in the tool card; the model reads the result.
    async with ExecutionProgress(ctx, RUNNING_PYTHON) as progress:
        return await _execute(ctx, kernel, code, ctx.execution_timeout, progress.output)


async def _execute(
    ctx: ToolContext,
    kernel: KernelBridge,
    code: str,
    timeout: float | None,
    on_output: Callable[[str], None] | None,
) -> ToolResult:
    """The ``python`` tool's result of running ``code``."""
    try:
        result = await kernel.execute(code, timeout=timeout, on_output=on_output)
    except ToolError as exc:
        if "FileNotFoundError" not in str(exc):
            raise
        # A guessed path is the usual cause: say which files there are.
        raise ToolError(f"{exc}\n{_root_files(ctx.root_dir)}") from exc
    prefix = ctx.tool_call_id

    def renamed(file: ToolFile) -> ToolFile:
        return dataclasses.replace(file, name=f"{prefix}-{file.name}")

    result.images = [renamed(f) for f in result.images]
    result.files = [renamed(f) for f in result.files]
    if not result.output.strip():
        result.output = NOTHING_PRINTED  # an empty result reads as a failure to a small model
    return result


def _root_files(root: Path, limit: int = 30) -> str:
    """The files at the top of the notebook root, for a model that guessed a path wrong."""
    try:
        names = sorted(p.name for p in root.iterdir() if p.is_file() and p.name[0] != ".")
    except OSError:
        return ""
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    listed = ", ".join(names[:limit]) or "none"
    return f"Files in the notebook folder (paths are relative to it): {listed}{more}"


@tool(readonly=True, host="kernel")
async def list_variables(ctx: ToolContext) -> str:
    """List the user's variables in the notebook kernel: one line each, with type and shape.

    Use it when the user mentions a variable or a dataframe. DataFrames show their columns and
    dtypes; modules, functions and private names are left out. While a cell is running, the
    list is the one taken when the prompt ran.
    """
    kernel = _kernel_of(ctx)
    at_prompt = ctx.variables_at_prompt
    if at_prompt is not None and isinstance(kernel, BusyKernel) and kernel.is_busy():
        # Reading the kernel would wait for the cell; the variables the prompt refers to are the
        # ones its own cell saw.
        return _as_of_prompt(ctx, at_prompt)
    ctx.report("Listing your variables")
    try:
        answer = await _introspect(ctx, None)
    except KernelBusy:
        # A cell the user queued (Run All) reached the kernel just before our request.
        if at_prompt is None:
            raise
        return _as_of_prompt(ctx, at_prompt)
    rows: list[str] = answer.get("rows", [])
    if not rows:
        return "(no user variables defined in the kernel yet)"
    return "\n".join([f"Variables in the kernel ({len(rows)}):", *rows])


def _as_of_prompt(ctx: ToolContext, rows: list[str]) -> str:
    ctx.report("Listing your variables " + AS_OF_PROMPT)
    lead = f"A cell is running in the kernel, so these are your variables {AS_OF_PROMPT}:"
    return f"{lead}\n{listed(rows)}"


@tool(readonly=True, host="kernel")
async def inspect_variable(
    ctx: ToolContext,
    name: Annotated[str, Field(description="name of a variable in the notebook kernel")],
) -> str:
    """Describe one variable of the notebook kernel in detail.

    Use it before computing on a dataframe: shape, dtype and missing count per column, and the
    first rows. Arrays: shape, dtype and values. Anything else: its type and value.
    """
    if not name.isidentifier():
        raise ToolError(f"{name!r} is not a variable name")
    ctx.report(f"Inspecting {name}")
    answer = await _introspect(ctx, name)
    if "error" in answer:
        raise ToolError(str(answer["error"]))
    return str(answer.get("text", ""))


def kernel_tools() -> list[Tool]:
    """The tools that need a kernel."""
    return [python, list_variables, inspect_variable]
