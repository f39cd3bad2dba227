"""The run widget: an anywidget; its front end (``js/``, built to ``static/widget.js``) draws a run.

The contract with the JavaScript (the traits and the comm messages both ways) is typed in
:mod:`.comm`, with its TypeScript twin in ``js/src/comm.ts``. Events are pushed only after a view
asked for a replay: nobody listens before that (and in server mode a view on a Jupyter page
follows the server itself). A view may also ask for the events of a child run of the widget's run
(a sub-agent it opened); those follow the child's own stream until the view lets it go.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, assert_never

import anywidget
import traitlets

from .comm import (
    InputAction,
    KernelMessage,
    ReplayMessage,
    ResumeAction,
    RetryAction,
    SuspendAction,
    TerminateAction,
    UnsubscribeMessage,
    outgoing,
)
from .followers import FollowedRuns, RunFeed
from .outbox import BATCH_INTERVAL, MAX_BATCH, Outbox

__all__ = ["BATCH_INTERVAL", "MAX_BATCH", "EventFeed", "RunWidget"]


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


class EventFeed(RunFeed, Protocol):
    """What feeds a widget: its run's envelopes, other runs' (children's), and actions."""

    def events_after(self, seq: int) -> list[dict[str, Any]]:
        """The widget's run's envelopes with a seq above ``seq``, ready to send."""
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
    waiting = traitlets.Unicode("").tag(sync=True)

    def __init__(self, feed: EventFeed | None = None, **traits: Any) -> None:
        super().__init__(**traits)
        self._feed = feed
        self._listening = False
        self._outbox = Outbox(self._send_message)
        self._children = FollowedRuns(feed, self._send_message, lambda: self.request_id)
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

    def close(self) -> None:
        """Stop following child runs, then close the comm."""
        self._children.close()
        super().close()

    # --- kernel → view

    def push(self, events: Sequence[dict[str, Any]]) -> None:
        """Queue envelopes for the views; sent in batches at most every BATCH_INTERVAL."""
        if self._listening:
            self._outbox.push(events)

    def flush(self) -> None:
        """Send what is queued as soon as the rate limit allows (the run came to rest)."""
        self._outbox.flush()

    def _send_message(self, message: KernelMessage) -> None:
        self.send(outgoing(message))

    # --- view → kernel

    def _on_view_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        message = self._children.read(content, "run widget")
        match message:
            case None:
                return
            case ReplayMessage(request_id=request_id, last_seq=last_seq):
                if request_id is None or request_id == self.request_id:
                    self._replay(last_seq)
                else:
                    self._children.follow(request_id, last_seq)
            case UnsubscribeMessage(request_id=request_id):
                self._children.unfollow(request_id)
            case (
                ResumeAction() | TerminateAction() | SuspendAction() | RetryAction() | InputAction()
            ):
                self._children.act(message)
            case _:
                assert_never(message)

    def _replay(self, last_seq: int) -> None:
        self._listening = True
        self._outbox.clear()
        if self._feed is not None:
            self._outbox.send_now(self._feed.events_after(last_seq))
