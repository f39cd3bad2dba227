"""Work a run does after its cell has returned: kept-alive tasks, and output that reaches a cell.

``%neta`` returns at once; following the run, starting a queued prompt and a queued undo happen
in tasks on the kernel's loop, and what they show is published as part of the kernel's latest
request.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from typing import Any

__all__ = ["in_latest_request", "spawn"]

_background: set[asyncio.Task[Any]] = set()


def in_latest_request(action: Callable[[], None]) -> None:
    """Run ``action`` as part of the kernel's latest request rather than the task's own cell.

    A background task keeps the parent header of the cell that created it, and IOPub messages
    of a finished cell reach no one: nbclient, for one, reads only the running cell's messages
    (and applies display updates from it to any cell). So the outcome of a run is published as
    part of whatever request came last, which may be the cell awaiting the run.
    """
    from IPython.core.getipython import get_ipython

    shell: Any = get_ipython()  # type: ignore[no-untyped-call]
    kernel = getattr(shell, "kernel", None)
    # ipykernel keeps the context of its latest shell request; there is no public accessor.
    latest_context = getattr(kernel, "_shell_context", None)
    latest = getattr(shell, "parent_header", None)
    if not isinstance(latest_context, contextvars.Context) or not latest:
        action()
        return

    def adopt_and_act() -> None:
        shell.set_parent(latest)  # the display publisher's parent, in this context only
        action()

    latest_context.copy().run(adopt_and_act)


def spawn(coroutine: Any, name: str) -> asyncio.Task[Any]:
    """A task on the running loop that is kept alive until it ends."""
    task = asyncio.get_running_loop().create_task(coroutine, name=name)
    _background.add(task)
    task.add_done_callback(_background.discard)
    return task
