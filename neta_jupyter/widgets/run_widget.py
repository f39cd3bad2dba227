"""The run widget: an anywidget; its front end (``js/``, built to ``static/widget.js``) draws a run.

Contract with the JavaScript:

* traits ``request_id``, ``mode`` (``"server"`` | ``"embedded"``), ``prompt`` and ``snapshot``
  (``{requestId, status, finalText, lastSeq, errorMessage?, suspendReason?}``; kept current by both
  sides, so a saved notebook keeps the run's outcome);
* kernel → view custom messages ``{"kind": "events", "events": [envelope, …]}``, at most one per
  :data:`BATCH_INTERVAL`, and ``{"kind": "error", "message": …}`` when an action failed;
* view → kernel ``{"kind": "replay", "lastSeq": n}`` (send everything after ``n``, then live) and
  ``{"kind": "action", "action": "resume" | "terminate" | "retry" | "input", "requestId", …}``.

Events are pushed only after a view asked for a replay: nobody listens before that (and in server
mode a view on a Jupyter page follows the server itself).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import Any, Protocol

import anywidget
import traitlets

BATCH_INTERVAL = 0.05
"""Seconds between two event messages to a view (jupyter_server drops bursts over 1000/s)."""
MAX_BATCH = 500
"""Envelopes in one message; a long replay is split."""

_STATIC = Path(__file__).resolve().parent.parent / "static"
_FALLBACK_ESM = """
function render({ model, el }) {
  const show = () => {
    const s = model.get("snapshot") || {};
    const head = `neta \\u00b7 ${s.status || "running"}`;
    el.innerText = [head, model.get("prompt") || "", s.finalText || s.errorMessage || ""]
      .filter(Boolean).join("\\n\\n");
  };
  show();
  model.on("change:snapshot", show);
  return () => model.off("change:snapshot", show);
}
export default { render };
"""


class EventFeed(Protocol):
    """What feeds a widget: the run's envelopes and the actions its view asks for."""

    def events_after(self, seq: int) -> list[dict[str, Any]]:
        """Envelopes with a seq above ``seq``, ready to send."""
        ...

    def perform(self, action: dict[str, Any]) -> Awaitable[None]:
        """Carry out a view's action (``resume``, ``terminate``, ``retry``, ``input``)."""
        ...


def _esm() -> Path | str:
    built = _STATIC / "widget.js"
    return built if built.is_file() else _FALLBACK_ESM


class RunWidget(anywidget.AnyWidget):
    """One run, live in a cell output."""

    _esm = _esm()
    if (_STATIC / "widget.css").is_file():
        _css = _STATIC / "widget.css"

    request_id = traitlets.Unicode("").tag(sync=True)
    mode = traitlets.Unicode("embedded").tag(sync=True)
    prompt = traitlets.Unicode("").tag(sync=True)
    snapshot = traitlets.Dict().tag(sync=True)

    def __init__(self, feed: EventFeed | None = None, **traits: Any) -> None:
        super().__init__(**traits)
        self._feed = feed
        self._listening = False
        self._pending: list[dict[str, Any]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._last_sent = float("-inf")
        self._tasks: set[asyncio.Task[None]] = set()
        self.on_msg(self._on_view_message)

    @traitlets.observe("comm")
    def _without_cell_hooks(self, change: dict[str, Any]) -> None:
        """Handle the views' messages without running the kernel's cell hooks around them.

        The comm package runs IPython's ``pre_execute``/``post_execute`` hooks around every comm
        message, and JupyterLab sends widget messages over kernel subshells, which ipykernel
        handles on threads of their own. Matplotlib's hooks then draw (and may display and
        close) the open figures on that thread while the code of a cell or of the ``python``
        tool draws them on the main one: a view saving its snapshot at that moment made the
        tool's figure come out half drawn. Nothing this widget does needs those hooks.
        """
        comm = change["new"]
        if comm is not None:
            comm.handle_msg = self._handle_msg

    # --- kernel → view

    def push(self, events: Sequence[dict[str, Any]]) -> None:
        """Queue envelopes for the views; sent in batches at most every BATCH_INTERVAL."""
        if not self._listening or not events:
            return
        self._pending.extend(events)
        if self._timer is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._flush()
            return
        delay = max(0.0, self._last_sent + BATCH_INTERVAL - loop.time())
        self._timer = loop.call_later(delay, self._flush)

    def flush(self) -> None:
        """Send what is queued as soon as the rate limit allows (the run came to rest)."""
        if not self._pending or self._timer is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._flush()
            return
        delay = self._last_sent + BATCH_INTERVAL - loop.time()
        if delay <= 0:
            self._flush()
        else:
            self._timer = loop.call_later(delay, self._flush)

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._pending = self._pending, []
        self._send_events(batch)

    def _send_events(self, events: Sequence[dict[str, Any]]) -> None:
        for start in range(0, len(events), MAX_BATCH):
            self.send({"kind": "events", "events": list(events[start : start + MAX_BATCH])})
        with contextlib.suppress(RuntimeError):
            self._last_sent = asyncio.get_running_loop().time()

    # --- view → kernel

    def _on_view_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        match content.get("kind"):
            case "replay":
                self._replay(content.get("lastSeq"))
            case "action":
                self._act(content)

    def _replay(self, last_seq: Any) -> None:
        self._listening = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._pending = []
        if self._feed is not None:
            after = last_seq if isinstance(last_seq, int) else -1
            self._send_events(self._feed.events_after(after))

    def _act(self, action: dict[str, Any]) -> None:
        if self._feed is None:
            self.send({"kind": "error", "message": "This run cannot be controlled from here"})
            return
        feed = self._feed

        async def perform() -> None:
            try:
                await feed.perform(action)
            except Exception as exc:
                self.send({"kind": "error", "message": str(exc) or type(exc).__name__})

        try:
            task = asyncio.get_running_loop().create_task(perform())
        except RuntimeError:
            self.send({"kind": "error", "message": "The kernel has no running event loop"})
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
