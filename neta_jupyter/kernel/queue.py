"""The order of one conversation: what a notebook asks goes in turn, each after the one before.

A session runs one prompt at a time, and "Run All" sends its prompts (and ``%neta undo``) at once.
Each of them is a :class:`Turn` that waits until the turn before it has *finished*: completed,
failed or stopped. A run that waits for the user (an approval, a question, a pause) has not
finished, so it holds the ones behind it; nothing behind it ever ends it. Going ahead without it
is the user's act: Stop it, or send the prompt with ``--new`` (a conversation of its own).

While a turn waits, it says for what ("Waiting for the prompt above: it needs your approval").
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

_LOOK_AGAIN = 0.5
"""Seconds between two looks at the turns ahead while one waits (what they wait for may change)."""

QUEUE_POLL = 1.0
"""At most this many seconds between polls of a resting run that a later prompt waits for."""

_FOR_THE_USER = {
    "PERMISSION_ASK": "needs your approval",
    "CLARIFY_REQUEST": "asks you a question",
    "MANUAL_SUSPEND": "is paused (resume it or stop it)",
    "SHUTDOWN_INTERRUPT": "was interrupted by a server shutdown (resume it or stop it)",
    "ASYNC_TOOL_PENDING": "waits for work running in the background",
}
"""What a run at rest waits for, by its suspend reason, as the turns behind it say it."""

GO_AHEAD_HINT = "To go ahead without it, stop it, or send this prompt with --new."


class Turn:
    """One thing a conversation does in its order; ``after`` is the turn it waits for."""

    def __init__(self) -> None:
        self.after: Turn | None = None
        """The turn before this one in the same conversation, when that had not finished."""
        self.awaited = False
        """A later turn waits for this one (a run at rest is then polled more often)."""
        self._finished = asyncio.Event()

    @property
    def finished(self) -> bool:
        """Done for good, however it ended: the turns behind it may go."""
        return self._finished.is_set()

    def done(self) -> None:
        """Finished: the turns behind it may go."""
        self._finished.set()

    def holding(self) -> str | None:
        """What the user must do before this turn can go on; None while it works by itself."""
        return None

    async def wait_turn(self, show: Callable[[str], None], *, hint: bool = True) -> None:
        """Until every turn before this one has finished; ``show`` hears what it waits for.

        ``hint``: say how to go ahead without the turn that holds it (a prompt can, with --new).
        """
        shown: str | None = None
        while (ahead := self.after) is not None and not ahead.finished:
            for turn in unfinished_ahead(self):
                turn.awaited = True
            text = waiting_text(self, hint=hint)
            if text != shown:
                show(text)
                shown = text
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ahead._finished.wait(), _LOOK_AGAIN)
        if shown is not None:
            show("")


def unfinished_ahead(turn: Turn) -> list[Turn]:
    """The turns before ``turn`` that have not finished, nearest first."""
    ahead: list[Turn] = []
    current = turn.after
    while current is not None and not current.finished:
        ahead.append(current)
        current = current.after
    return ahead


def waiting_text(turn: Turn, *, hint: bool = True) -> str:
    """What a queued turn waits for, for a person: "" when it waits for nothing."""
    ahead = unfinished_ahead(turn)
    if not ahead:
        return ""
    reason = ahead[-1].holding()  # the first of them: working, or waiting for the user
    if reason is None:
        above = "the prompt above" if len(ahead) == 1 else f"the {len(ahead)} prompts above"
        return f"Waiting for {above} to finish."
    if len(ahead) == 1:
        text = f"Waiting for the prompt above: it {reason}."
    else:
        text = f"Waiting for the {len(ahead)} prompts above; the first {reason}."
    return f"{text} {GO_AHEAD_HINT}" if hint else text


def holding_reason(suspend_type: str | None) -> str:
    """What a run suspended for ``suspend_type`` waits for."""
    return _FOR_THE_USER.get(suspend_type or "", "waits for you")
