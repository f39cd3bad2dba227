"""``%neta undo``: revert the last change of the notebook's latest run, in the conversation's turn.

Under "Run All" the cell runs while the prompts above it are still queued or waiting for an
approval: reverting then would take back a change of the wrong run, or find none. So an undo
after unfinished prompts of its conversation waits for them like a prompt would (its output says
so), then reverts. Nothing to revert is a note, not an error: the cells after it run on.
"""

from __future__ import annotations

import contextlib
from typing import Any

from .host import Host, HostError
from .queue import Turn
from .tasks import in_latest_request, spawn

NOTHING_TO_DO = frozenset({"NOTHING_TO_UNDO", "NOT_AVAILABLE"})
"""Codes of an undo that finds nothing to revert: told as a note."""


def undo_now(host: Host, path: str) -> str:
    """Revert now; what to tell the user (raises :class:`HostError` when the revert failed)."""
    try:
        edit = host.undo(path)
    except HostError as exc:
        if exc.code in NOTHING_TO_DO:
            return f"nothing to undo: {exc.message}"
        raise
    return f"reverted the {edit.get('kind')} of cell {edit.get('cellId')} in {path}"


class QueuedUndo(Turn):
    """An undo that waits for the prompts before it; its output says what it waits for."""

    def __init__(self, host: Host, path: str) -> None:
        super().__init__()
        self.host = host
        self.path = path
        self._display: Any = None

    def begin(self) -> None:
        """Show that it waits, and revert once the turns before it have finished."""
        from IPython.display import display

        queued = self._bundle("%neta undo: queued behind the prompts above")
        self._display = display(queued, raw=True, display_id=True)  # type: ignore[no-untyped-call]
        spawn(self._revert_in_turn(), "neta-undo")

    async def _revert_in_turn(self) -> None:
        try:
            await self.wait_turn(self._show_waiting, hint=False)
            try:
                outcome = undo_now(self.host, self.path)
            except HostError as exc:
                outcome = f"could not undo: {exc.message}"
            self._show(outcome)
        finally:
            self._finished.set()

    def _show_waiting(self, text: str) -> None:
        if text:
            self._show(f"%neta undo: {text}")

    def _show(self, text: str) -> None:
        if self._display is not None:
            bundle = self._bundle(text)
            with contextlib.suppress(Exception):
                in_latest_request(lambda: self._display.update(bundle, raw=True))

    @staticmethod
    def _bundle(text: str) -> dict[str, str]:
        return {"text/plain": text}
