"""The crew board: a crew's tasks, live, with buttons for the decisions it waits for.

The kernel sets ``board`` (a :class:`~.board.CrewBoardState`, see
:meth:`CrewHandle.board_state`) as the crew's log arrives; a view's click comes back as a
:data:`~.board.BoardMessage` (``decide`` or ``control``) to the handler the board was made with.
Both are in the comm's JSON Schema. Without the built module the crew keeps its HTML board
instead.

A view may open a task into its run's live view. On a Jupyter page with the crew on the server
the view follows the run there itself; otherwise it asks this widget over the comm, with the run
widget's messages (:mod:`.comm`: ``replay`` and ``unsubscribe`` naming the run, ``action``), and
the widget follows the run for it as the run widget follows a child run.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from .board import BoardMessage, board_message
from .comm import (
    BadMessage,
    ErrorMessage,
    KernelMessage,
    ReplayMessage,
    UnsubscribeMessage,
    outgoing,
)
from .followers import FollowedRuns, RunFeed

_STATIC = Path(__file__).resolve().parent.parent / "static"
BOARD_JS = _STATIC / "crew_board.js"


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
        on_action: Callable[[BoardMessage], None],
        runs: RunFeed | None = None,
        **traits: Any,
    ) -> None:
        super().__init__(**traits)
        self._on_action = on_action
        self._runs = FollowedRuns(runs, self._tell)
        self.on_msg(self._on_view_message)

    def close(self) -> None:
        """Stop following the tasks' runs, then close the comm."""
        self._runs.close()
        super().close()

    def _on_view_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        try:
            own = board_message(content)
        except BadMessage as exc:
            self._tell(ErrorMessage(kind="error", message=str(exc)))
            return
        if own is not None:
            self._on_action(own)
            return
        message = self._runs.read(content, "crew board")
        match message:
            case None:
                return
            case ReplayMessage(request_id=str() as request_id, last_seq=last_seq):
                self._runs.follow(request_id, last_seq)
            case ReplayMessage():
                self._tell(ErrorMessage(kind="error", message="The board has no run of its own"))
            case UnsubscribeMessage(request_id=request_id):
                self._runs.unfollow(request_id)
            case _:
                self._runs.act(message)

    def _tell(self, message: KernelMessage) -> None:
        self.send(outgoing(message))
