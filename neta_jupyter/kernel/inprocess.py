"""Running kernel tools inside this kernel (embedded host): the user's namespace, captured output.

The code runs on the kernel's main thread, like a cell but without one: nothing enters the
history, the execution count does not move, and output goes to the tool instead of the notebook.
Output is captured in order: ``sys.stdout``/``sys.stderr`` and the shell's display publisher are
swapped for sinks while the code runs. Matplotlib figures the code leaves open become PNG images
and are closed, so they do not pop up under the user's next cell.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import io
import itertools
import linecache
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from types import CodeType, TracebackType
from typing import Any

from IPython.core.displaypub import DisplayPublisher

from ..tools.kernel_tools import KernelOutput
from ..tools.values import ToolResult

_counter = itertools.count(1)


class _ExecutionTimeout(BaseException):
    """Raised inside the code when its time is up (a BaseException, like KeyboardInterrupt)."""


class _Sink(io.TextIOBase):
    """A text stream that hands every write to the collector."""

    def __init__(self, output: KernelOutput) -> None:
        self._output = output

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._output.stream(text)
        return len(text)

    def isatty(self) -> bool:
        return False


class _Publisher(DisplayPublisher):
    """Receives ``display(...)`` calls made by the code."""

    def __init__(self, output: KernelOutput) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self._output = output

    def publish(self, data: dict[str, Any], metadata: Any = None, *args: Any, **kw: Any) -> None:
        self._output.rich(data)

    def clear_output(self, wait: bool = False) -> None:
        pass


class InProcessKernelBridge:
    """:class:`~neta_jupyter.tools.KernelBridge` for this very kernel."""

    def __init__(self, shell: Any) -> None:
        self._shell = shell
        self._lock = asyncio.Lock()

    async def execute(
        self,
        code: str,
        *,
        timeout: float | None = None,
        on_output: Callable[[str], None] | None = None,
    ) -> ToolResult:
        """Run ``code`` in the user's namespace and collect what it printed and displayed."""
        async with self._lock:
            output = KernelOutput(on_stream=on_output)
            filename = f"<neta-python-{next(_counter)}>"
            linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
            figures = _open_figures()
            try:
                with _captured(self._shell, output):
                    await _run(code, filename, self._shell.user_ns, output, timeout)
            finally:
                _collect_figures(figures, output)
            return output.result()


async def _run(
    code: str, filename: str, namespace: dict[str, Any], output: KernelOutput, timeout: float | None
) -> None:
    try:
        body, last = _compile(code, filename)
        await _evaluate(body, namespace, timeout)
        if last is not None:
            value = await _evaluate(last, namespace, timeout)
            if value is not None:
                output.rich(_format(value))
    except _ExecutionTimeout:
        output.fail("TimeoutError", f"the code ran longer than {timeout:g} s and was stopped", [])
    except (Exception, KeyboardInterrupt) as exc:
        output.fail(type(exc).__name__, str(exc), _traceback(exc, filename))


def _compile(code: str, filename: str) -> tuple[CodeType, CodeType | None]:
    """The code as a module, and its last bare expression apart (its value is shown)."""
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    tree = ast.parse(code, filename, "exec")
    last: CodeType | None = None
    if tree.body and isinstance(final := tree.body[-1], ast.Expr):
        tree.body.pop()
        last = compile(ast.Expression(final.value), filename, "eval", flags=flags)
    return compile(tree, filename, "exec", flags=flags), last


async def _evaluate(compiled: CodeType, namespace: dict[str, Any], timeout: float | None) -> Any:
    with _alarm(timeout):
        result = eval(compiled, namespace)
    if asyncio.iscoroutine(result):  # top-level await: time it by the loop, not a signal
        return await asyncio.wait_for(result, timeout)
    return result


@contextlib.contextmanager
def _alarm(timeout: float | None) -> Iterator[None]:
    """Interrupt synchronous code after ``timeout`` seconds (main thread, POSIX only)."""
    usable = (
        timeout is not None
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )
    if not usable or timeout is None:
        yield
        return

    def expire(_signum: int, _frame: Any) -> None:
        raise _ExecutionTimeout

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def _captured(shell: Any, output: KernelOutput) -> Iterator[None]:
    sink = _Sink(output)
    saved = sys.stdout, sys.stderr, shell.display_pub
    sys.stdout = sys.stderr = sink
    shell.display_pub = _Publisher(output)
    try:
        yield
    finally:
        sys.stdout, sys.stderr, shell.display_pub = saved


def _format(value: Any) -> dict[str, Any]:
    try:
        from IPython.core.interactiveshell import InteractiveShell

        formatter = InteractiveShell.instance().display_formatter
        if formatter is not None:
            data, _metadata = formatter.format(value)  # type: ignore[no-untyped-call]
            return dict(data)
    except Exception:
        pass
    return {"text/plain": repr(value)}


def _traceback(exc: BaseException, filename: str) -> list[str]:
    """The traceback from the code's own first frame (our frames are noise to the model)."""
    tb: TracebackType | None = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    if isinstance(exc, SyntaxError) or tb is None:
        return traceback.format_exception_only(type(exc), exc)
    return traceback.format_exception(type(exc), exc, tb)


def _open_figures() -> set[int] | None:
    pyplot = sys.modules.get("matplotlib.pyplot")
    return None if pyplot is None else set(pyplot.get_fignums())


def _collect_figures(before: set[int] | None, output: KernelOutput) -> None:
    """New figures the code left open become images, and are closed."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return
    for number in pyplot.get_fignums():
        if before is not None and number in before:
            continue
        figure = pyplot.figure(number)
        buffer = io.BytesIO()
        try:
            figure.savefig(buffer, format="png", bbox_inches="tight")
        except Exception as exc:
            output.stream(f"[a figure could not be drawn: {exc}]\n")
        else:
            output.rich({"image/png": buffer.getvalue()})
        finally:
            pyplot.close(figure)
