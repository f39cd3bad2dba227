"""The crew board: a crew's tasks, live, with buttons for the decisions it waits for.

The kernel sets ``board`` (a plain mapping, see :meth:`CrewHandle.board_state`) as the crew's
log arrives; a view's click comes back as ``{type: "decide" | "control", ...}`` to the handler
the board was made with. Without the built module the crew keeps its HTML board instead.

A view may open a task into its run's live view. On a Jupyter page with the crew on the server
the view follows the run there itself; otherwise it asks this widget over the comm, with the run
widget's messages (:mod:`.comm`: ``replay`` and ``unsubscribe`` naming the run, ``action``), and
the widget follows the run for it as the run widget follows a child run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

import anywidget
import traitlets

from .comm import (
    Action,
    BadMessage,
    ErrorMessage,
    KernelMessage,
    ReplayMessage,
    UnknownKind,
    UnsubscribeMessage,
    outgoing,
    parse_view_message,
)
from .outbox import ChildFollower

_log = logging.getLogger(__name__)
_STATIC = Path(__file__).resolve().parent.parent / "static"
BOARD_JS = _STATIC / "crew_board.js"


class TaskRunFeed(Protocol):
    """Where the tasks' runs come from, and where a view's action on one of them goes."""

    def follow_run(self, request_id: str, after_seq: int) -> AsyncIterator[dict[str, Any]]:
        """The run's envelopes after ``after_seq`` up to its next terminal event."""
        ...

    def perform(self, action: Action) -> Awaitable[None]:
        """Carry out a view's action on the run it names."""
        ...


def available() -> bool:
    """Whether the board's module was built (``cd js && npm run build``)."""
    return BOARD_JS.is_file()


class CrewBoard(anywidget.AnyWidget):
    """One crew, live in a cell output."""

    _esm = BOARD_JS if BOARD_JS.is_file() else "export default { render() {} };"
    if (_STATIC / "widget.css").is_file():
        _css = _STATIC / "widget.css"

    board = traitlets.Dict().tag(sync=True)

    def __init__(
        self,
        on_action: Callable[[dict[str, Any]], None],
        runs: TaskRunFeed | None = None,
        **traits: Any,
    ) -> None:
        super().__init__(**traits)
        self._on_action = on_action
        self._runs = runs
        self._followers: dict[str, ChildFollower] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.on_msg(self._on_view_message)

    def close(self) -> None:
        """Stop following the tasks' runs, then close the comm."""
        for follower in self._followers.values():
            follower.stop()
        self._followers.clear()
        super().close()

    def _on_view_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("type") in ("decide", "control"):
            self._on_action(content)
            return
        try:
            message = parse_view_message(content)
        except UnknownKind as exc:
            _log.warning("crew board: ignored %s", exc)
            return
        except BadMessage as exc:
            self._tell(ErrorMessage(kind="error", message=f"The kernel refused {exc}"))
            return
        match message:
            case ReplayMessage(request_id=str() as request_id, last_seq=last_seq):
                self._follow(request_id, last_seq)
            case ReplayMessage():
                self._tell(ErrorMessage(kind="error", message="The board has no run of its own"))
            case UnsubscribeMessage(request_id=request_id):
                follower = self._followers.pop(request_id, None)
                if follower is not None:
                    follower.stop()
            case _:
                self._act(message)

    def _tell(self, message: KernelMessage) -> None:
        self.send(outgoing(message))

    def _follow(self, request_id: str, last_seq: int) -> None:
        if self._runs is None:
            self._refuse("This run cannot be followed from here", request_id)
            return
        previous = self._followers.pop(request_id, None)
        if previous is not None:
            previous.stop()
        follower = ChildFollower(self._runs, request_id, self._tell)
        if follower.start(last_seq):
            self._followers[request_id] = follower
        else:
            self._refuse("The kernel has no running event loop", request_id)

    def _refuse(self, text: str, request_id: str | None) -> None:
        self._tell(ErrorMessage(kind="error", message=text, request_id=request_id))

    def _act(self, action: Action) -> None:
        runs = self._runs
        if runs is None:
            self._refuse("This run cannot be controlled from here", action.request_id)
            return

        async def perform() -> None:
            try:
                await runs.perform(action)
            except Exception as exc:
                self._refuse(str(exc) or type(exc).__name__, action.request_id)
                return
            follower = self._followers.get(action.request_id)
            if follower is not None:
                follower.poke()

        try:
            task = asyncio.get_running_loop().create_task(perform())
        except RuntimeError:
            self._refuse("The kernel has no running event loop", action.request_id)
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
