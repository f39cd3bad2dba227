"""The runs a widget follows for its views, and the actions its views take on runs.

The run widget follows its run's children this way (a sub-agent a view opened), the crew board
its tasks' runs (a task a view opened); a view's action on any of them (or on the run widget's
own run) goes to the feed, and a refusal goes back to the views naming the run it was about.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

from .comm import (
    Action,
    BadMessage,
    ErrorMessage,
    KernelMessage,
    UnknownKind,
    ViewMessage,
    parse_view_message,
)
from .outbox import ChildFollower

_log = logging.getLogger(__name__)


class RunFeed(Protocol):
    """Where the followed runs come from, and where a view's action on a run goes."""

    def follow_run(self, request_id: str, after_seq: int) -> AsyncIterator[dict[str, Any]]:
        """The run's envelopes after ``after_seq`` up to its next terminal event."""
        ...

    def perform(self, action: Action) -> Awaitable[None]:
        """Carry out a view's action on the run it names."""
        ...


class FollowedRuns:
    """The runs the views opened, each followed until it ends or a view lets it go.

    ``feed`` ``None``: the widget has nothing to follow or control (every request is refused).
    ``own``: the widget's own run, whose refusals name no run (its views show them as theirs).
    """

    def __init__(
        self,
        feed: RunFeed | None,
        send: Callable[[KernelMessage], None],
        own: Callable[[], str | None] = lambda: None,
    ) -> None:
        self._feed = feed
        self._send = send
        self._own = own
        self._followers: dict[str, ChildFollower] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def read(self, content: Any, widget: str) -> ViewMessage | None:
        """``content`` as a view's message; ``None`` if it is none (logged; a bad one refused)."""
        try:
            return parse_view_message(content)
        except UnknownKind as exc:
            _log.warning("%s: ignored %s", widget, exc)
        except BadMessage as exc:
            _log.warning("%s: refused %s", widget, exc)
            self._send(ErrorMessage(kind="error", message=f"The kernel refused {exc}"))
        return None

    def follow(self, request_id: str, last_seq: int) -> None:
        """Send the run's events after ``last_seq`` to the views, from now on (again)."""
        if self._feed is None:
            self.refuse("This run cannot be followed from here", request_id)
            return
        self.unfollow(request_id)
        follower = ChildFollower(self._feed, request_id, self._send)
        if follower.start(last_seq):
            self._followers[request_id] = follower
        else:
            self.refuse("The kernel has no running event loop", request_id)

    def unfollow(self, request_id: str) -> None:
        """Send nothing more of the run."""
        follower = self._followers.pop(request_id, None)
        if follower is not None:
            follower.stop()

    def close(self) -> None:
        """Follow no run any more."""
        for follower in self._followers.values():
            follower.stop()
        self._followers.clear()

    def act(self, action: Action) -> None:
        """Carry out ``action`` on the loop; a followed run it names is looked at again after."""
        feed = self._feed
        if feed is None:
            self.refuse("This run cannot be controlled from here", action.request_id)
            return

        async def perform() -> None:
            try:
                await feed.perform(action)
            except Exception as exc:
                self.refuse(str(exc) or type(exc).__name__, action.request_id)
                return
            follower = self._followers.get(action.request_id)
            if follower is not None:
                follower.poke()

        try:
            task = asyncio.get_running_loop().create_task(perform())
        except RuntimeError:
            self.refuse("The kernel has no running event loop", action.request_id)
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def refuse(self, text: str, request_id: str | None) -> None:
        """Tell the views ``text`` about the run ``request_id``."""
        target = None if request_id == self._own() else request_id
        self._send(ErrorMessage(kind="error", message=text, request_id=target))
