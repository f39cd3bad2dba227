"""The crew board: a crew's tasks, live, with buttons for the decisions it waits for.

The kernel sets ``board`` (a plain mapping, see :meth:`CrewHandle.board_state`) as the crew's
log arrives; a view's click comes back as ``{type: "decide" | "control", ...}`` to the handler
the board was made with. Without the built module the crew keeps its HTML board instead.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anywidget
import traitlets

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

    def __init__(self, on_action: Callable[[dict[str, Any]], None], **traits: Any) -> None:
        super().__init__(**traits)
        self._on_action = on_action
        self.on_msg(self._on_view_message)

    def _on_view_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("type") in ("decide", "control"):
            self._on_action(content)
