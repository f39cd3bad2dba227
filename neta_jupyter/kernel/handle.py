"""A run as the notebook sees it: a handle that follows the run in the background.

The handle starts the run (or attaches to an existing one), follows its events on the kernel's
event loop, keeps them for replay, feeds the widget, and refreshes the cell output (the widget's
``snapshot`` trait and the markdown transcript) whenever the run comes to rest. Nothing here ever
waits on the cell's thread: ``wait()`` is a coroutine (``await run`` in a cell).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Generator, Sequence
from pathlib import Path
from typing import Any, assert_never

from ..client import RunRequest, Started, TransportError
from ..widgets.comm import (
    Action,
    InputAction,
    ResumeAction,
    RetryAction,
    SuspendAction,
    TerminateAction,
)
from ..widgets.transcript import RunDigest, render_markdown, render_text
from .host import Host, HostError
from .queue import QUEUE_POLL, Turn, holding_reason, unfinished_ahead, waiting_text
from .tasks import in_latest_request, spawn

_FOLLOW_BACKOFF = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
"""Seconds between polls of a run at rest that may continue (suspended, retryable)."""

KERNEL_TOOLS = frozenset({"python", "list_variables", "inspect_variable"})
KERNEL_GRACE = 1.0
"""Seconds a server-hosted kernel tool may wait on this kernel before ``wait()`` gives up."""


class RunNeedsKernel(RuntimeError):
    """A cell awaits a server-hosted run that needs this kernel, which the cell keeps busy."""

    def __init__(self, tool_name: str) -> None:
        super().__init__(
            f"the run is waiting for this kernel to run `{tool_name}`, but this cell keeps the "
            "kernel busy while it waits for the run (a kernel does one thing at a time). The run "
            "goes on when the cell ends: in a notebook served by Jupyter, let the widget show it "
            "instead of awaiting it."
        )
        self.tool_name = tool_name


class RunHandle(Turn):
    """One run: ``request_id``, ``events``, ``text``, ``status``, ``usage``; await it to wait."""

    def __init__(
        self,
        host: Host,
        prompt: str,
        *,
        options: RunRequest | None = None,
        request_id: str | None = None,
        on_start: Callable[[RunHandle], None] | None = None,
        files: Sequence[Path] = (),
    ) -> None:
        super().__init__()
        self.host = host
        self.prompt = prompt
        self.options = options
        self.files = list(files)
        """Local files uploaded and attached when the run is created."""
        self.request_id = request_id
        self.session_id: str | None = None
        self.events: list[dict[str, Any]] = []
        """Envelopes received so far, in seq order."""
        self.digest = RunDigest(request_id=request_id or "")
        self.start_error: HostError | None = None
        self.widget: Any = None
        self._display: Any = None
        self._rest = asyncio.Event()
        self._kick = asyncio.Event()
        self._changed = asyncio.Event()
        self._kernel_calls: dict[str, str] = {}
        self._task: asyncio.Task[Any] | None = None
        self._on_start = on_start
        self._waiting = ""

    # --- what the user reads

    @property
    def text(self) -> str:
        """The answer text so far."""
        return self.digest.text

    @property
    def status(self) -> str:
        """``queued``, ``starting``, ``running``, ``suspended``, ``completed`` or ``failed``.

        ``queued``: an earlier prompt of its conversation has not finished yet.
        """
        return "queued" if self.queued else self.digest.status

    @property
    def queued(self) -> bool:
        """Not started: it waits for an earlier prompt of its conversation to finish."""
        return self.request_id is None and self.start_error is None and bool(unfinished_ahead(self))

    @property
    def usage(self) -> dict[str, Any]:
        """Token usage of the run (as of its last terminal event)."""
        return dict(self.digest.usage)

    @property
    def error(self) -> str | None:
        """Why the run failed (or could not start)."""
        return self.digest.error_message

    @property
    def pending_ask(self) -> dict[str, Any] | None:
        """The permission ask or question the run waits on."""
        return self.digest.pending_ask

    @property
    def waiting(self) -> str:
        """What the run waits for before it starts (an earlier prompt of its conversation)."""
        return self._waiting

    @waiting.setter
    def waiting(self, text: str) -> None:
        self._waiting = text
        if self.widget is not None:
            self.widget.waiting = text

    def holding(self) -> str | None:
        """What the user must do before this run goes on (None while it works)."""
        if self.status != "suspended":
            return None
        return holding_reason(self.digest.suspend_type)

    @property
    def at_rest(self) -> bool:
        """Completed, failed or waiting for the user: nothing happens until someone acts."""
        return self._rest.is_set()

    def markdown(self) -> str:
        """The static transcript (markdown in which nothing from the run can run or load)."""
        shown = render_markdown(self.prompt, self.digest)
        return f"{shown}\n\n*{self._waiting}*" if self._waiting else shown

    def plain_transcript(self) -> str:
        """The static transcript as plain text."""
        shown = render_text(self.prompt, self.digest)
        return f"{shown}\n{self._waiting}" if self._waiting else shown

    def _repr_markdown_(self) -> str:
        return self.markdown()

    def __repr__(self) -> str:
        return f"<RunHandle {self.request_id or '(starting)'} {self.status}>"

    # --- lifecycle

    def begin(self) -> asyncio.Task[Any]:
        """Start (or attach) and follow, in the background on the running loop."""
        if self._task is None:
            queued = self.after is not None and not self.after.finished
            if queued:
                self.waiting = waiting_text(self)
            if self.request_id is None and self.options is not None and not queued:
                try:
                    started = self.host.start_now(self.options, self.files)
                except HostError as exc:
                    self._start_failed(exc)
                else:
                    if started is not None:
                        self._started(started)
            self._task = spawn(self._drive(), f"neta-follow-{self.request_id or 'new'}")
        return self._task

    async def wait(self, timeout: float | None = None) -> RunHandle:
        """Until the run is at rest: completed, failed, or waiting for the user.

        Also when it is queued behind an earlier prompt that waits for the user (its status is
        then ``queued``): nothing happens until someone acts.

        Raises :class:`TimeoutError` after ``timeout`` seconds, and :class:`RunNeedsKernel` when
        a server-hosted run (this one, or one it is queued behind) waits for this kernel, which
        the awaiting cell keeps busy.
        """
        if self._task is None:
            self.begin()
        async with asyncio.timeout(timeout):
            blocked_since: float | None = None
            while not self._rest.is_set() and not self._held_by_the_user():
                now = asyncio.get_running_loop().time()
                if (tool := self._kernel_tool_waiting()) is not None:
                    blocked_since = blocked_since if blocked_since is not None else now
                    if now - blocked_since >= KERNEL_GRACE:
                        raise RunNeedsKernel(tool)
                else:
                    blocked_since = None
                self._changed.clear()
                await self._until_changed(KERNEL_GRACE / 4)
        # Once more as part of the awaiting cell: a headless client (nbclient) may have moved
        # on from the cell that started the run before the run ended.
        self._refresh_output()
        return self

    async def _until_changed(self, timeout: float) -> None:
        """Until this run changes, or (queued) the run it waits for comes to rest."""
        ahead = unfinished_ahead(self) if self.request_id is None else []
        first = ahead[-1] if ahead and isinstance(ahead[-1], RunHandle) else None
        events = [self._changed] if first is None else [self._changed, first._rest]
        waits = [asyncio.ensure_future(e.wait()) for e in events]
        try:
            await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()

    def _held_by_the_user(self) -> bool:
        """Queued behind a run that waits for the user: nothing happens until someone acts."""
        ahead = unfinished_ahead(self) if self.request_id is None else []
        return bool(ahead) and ahead[-1].holding() is not None

    def _kernel_tool_waiting(self) -> str | None:
        """A kernel tool that this run, or a run it is queued behind, waits to run here."""
        if self.host.mode != "server":
            return None
        runs = [self, *unfinished_ahead(self)] if self.request_id is None else [self]
        tools = [t for r in runs if isinstance(r, RunHandle) for t in r._kernel_calls.values()]
        return min(tools, default=None)

    def __await__(self) -> Generator[Any, None, RunHandle]:
        return self.wait().__await__()

    async def _drive(self) -> None:
        try:
            if self.start_error is not None:
                return
            await self.wait_turn(self._show_waiting)
            if self.request_id is None and not await self._start():
                return
            await self._follow()
        finally:
            if self.widget is not None:
                self.widget.flush()
            if not self._rest.is_set():
                self._settle()
            self._finished.set()  # followed no more: it ended, or it cannot be followed

    def _show_waiting(self, text: str) -> None:
        self.waiting = text
        self._changed.set()

    async def _start(self) -> bool:
        assert self.options is not None, "a new run needs its options"
        try:
            started = await self.host.start(self.options, self.files)
        except HostError as exc:
            self._start_failed(exc)
            return False
        self._started(started)
        return True

    def _start_failed(self, exc: HostError) -> None:
        self.start_error = exc
        self.digest.status = "failed"
        self.digest.error_message = f"could not start the run: {exc.message}"
        self._settle()

    def _started(self, started: Started) -> None:
        self.request_id, self.session_id = started.request_id, started.session_id
        self.digest.request_id = started.request_id
        if self._on_start is not None:
            self._on_start(self)
        if self.widget is not None:
            self.widget.request_id = started.request_id
            self.widget.snapshot = self.digest.snapshot()

    async def _follow(self) -> None:
        assert self.request_id is not None
        pause = 0
        while not self.digest.final:
            received = False
            try:
                async for envelope in self.host.follow(self.request_id, self.digest.last_seq):
                    received = self._receive(envelope) or received
            except TransportError:
                received = False  # the server went away for a while: try again later
            except HostError as exc:
                if self.digest.status == "starting":
                    self.digest.status = "failed"
                    self.digest.error_message = exc.message
                self._settle()
                return
            if self.digest.final:
                break
            if received:
                pause = 0
                continue
            delay = _FOLLOW_BACKOFF[min(pause, len(_FOLLOW_BACKOFF) - 1)]
            if self.awaited:  # a later prompt waits: see its approval (given elsewhere) soon
                delay = min(delay, QUEUE_POLL)
            pause += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._kick.wait(), delay)
            self._kick.clear()

    def _receive(self, envelope: dict[str, Any]) -> bool:
        if not self.digest.apply(envelope):
            return False
        self.events.append(envelope)
        self._track_kernel_calls(envelope)
        self._changed.set()
        if self.widget is not None:
            self.widget.push([self._outgoing(envelope)])
        if self.digest.at_rest and str(envelope.get("eventType", "")).startswith("MESSAGE_"):
            self._settle()
        elif self._rest.is_set():
            self._rest.clear()
            self._finished.clear()  # a failure retried from elsewhere: it goes on
        return True

    def _track_kernel_calls(self, envelope: dict[str, Any]) -> None:
        data = envelope.get("data") or {}
        call_id = str(data.get("toolCallId") or "")
        match envelope.get("eventType"):
            case "TOOL_START" if data.get("toolName") in KERNEL_TOOLS:
                self._kernel_calls[call_id] = str(data["toolName"])
            case "TOOL_COMPLETED" | "TOOL_FAILED":
                self._kernel_calls.pop(call_id, None)
            case "MESSAGE_COMPLETED" | "MESSAGE_SUSPENDED" | "MESSAGE_FAILED":
                self._kernel_calls.clear()

    def _settle(self) -> None:
        """At rest: refresh the saved state of the output, wake those waiting."""
        in_latest_request(self._refresh_output)
        self._rest.set()
        if self.status in ("completed", "failed"):
            self._finished.set()
        self._changed.set()

    def _refresh_output(self) -> None:
        if self.widget is not None:
            self.widget.flush()
            with self.widget.hold_sync():
                self.widget.snapshot = self.digest.snapshot()
            # Again in full: a headless client may have missed the changes (see above).
            self.widget.send_state(["request_id", "snapshot"])
        if self._display is not None:
            with contextlib.suppress(Exception):
                self._display.update(self.bundle(), raw=True)

    # --- actions (from code, the magics or the widget)

    def drop(self) -> None:
        """Take the prompt out of the queue: it never runs (``%neta stop`` while it waits)."""
        self.start_error = HostError("stopped before it started", code="USER_CANCELLED")
        self.digest.status = "failed"
        self.digest.error_message = "stopped before it started (it was queued)"
        self.waiting = ""
        if self._task is not None and not self._task.done():
            self._task.cancel()  # its end settles it
        else:
            self._settle()
            self.done()

    def _rid(self) -> str:
        if self.request_id is None:
            raise HostError("the run has not started yet", code="NOT_STARTED")
        return self.request_id

    async def approve(self, *, always: bool = False) -> None:
        """Allow the pending tool call (``always``: for the rest of the session)."""
        ask = self.pending_ask or {}
        await self.host.resume(self._rid(), approved=True, ask_id=ask.get("askId"), always=always)
        self._resumed()

    async def deny(self) -> None:
        """Refuse the pending tool call."""
        ask = self.pending_ask or {}
        await self.host.resume(self._rid(), approved=False, ask_id=ask.get("askId"))
        self._resumed()

    async def answer(self, text: str) -> None:
        """Answer the pending question."""
        ask = self.pending_ask or {}
        ask_id = ask.get("clarifyId") or ask.get("askId")
        await self.host.resume(self._rid(), ask_id=ask_id, answer=text)
        self._resumed()

    async def stop(self) -> None:
        """Terminate the run."""
        await self.host.terminate(self._rid())
        self.poke()

    async def suspend(self) -> None:
        """Pause the run at its next step boundary (a running tool ends first)."""
        await self.host.suspend(self._rid())
        self.poke()

    async def resume(self) -> None:
        """Continue a paused or interrupted run (one that waits on no ask)."""
        await self.host.resume(self._rid())
        self._resumed()

    async def retry(self) -> None:
        """Continue a recoverable failure."""
        await self.host.retry(self._rid())
        self._resumed()

    async def add_input(self, content: str) -> str:
        """Add input the run reads at its next step."""
        return await self.host.add_input(self._rid(), content)

    def poke(self) -> None:
        """Look for new events now (after an action taken elsewhere)."""
        self._kick.set()

    def _resumed(self) -> None:
        self._rest.clear()
        self._finished.clear()
        self._kick.set()
        if self._task is None or self._task.done():
            self._task = None
            self.begin()

    # --- EventFeed (the widget)

    def events_after(self, seq: int) -> list[dict[str, Any]]:
        """Envelopes after ``seq``, as the view receives them."""
        return [self._outgoing(e) for e in self.events if int(e.get("seq", -1)) > seq]

    async def follow_run(
        self, request_id: str, after_seq: int = -1
    ) -> AsyncIterator[dict[str, Any]]:
        """Another run's envelopes (a child of this one), as the view receives them.

        A dropped connection only ends the segment: the widget looks again later.
        """
        try:
            async for envelope in self.host.follow(request_id, after_seq):
                yield self._outgoing(envelope)
        except TransportError:
            return

    async def perform(self, action: Action) -> None:
        """A view's action, on the run it names (this one, or a child of it)."""
        request_id = action.request_id or self._rid()
        match action:
            case ResumeAction():
                await self.host.resume(
                    request_id,
                    approved=action.approved,
                    ask_id=action.ask_id,
                    always=action.always,
                    answer=action.answer,
                    digest=action.digest,
                )
            case TerminateAction():
                await self.host.terminate(request_id)
            case SuspendAction():
                await self.host.suspend(request_id)
            case RetryAction():
                await self.host.retry(request_id)
            case InputAction():
                await self.host.add_input(request_id, action.content)
            case _:
                assert_never(action)
        if request_id != self.request_id:
            self.poke()  # this run may go on now that its child does
        elif not isinstance(action, InputAction | TerminateAction | SuspendAction):
            self._resumed()
        else:
            self.poke()

    def _outgoing(self, envelope: dict[str, Any]) -> dict[str, Any]:
        """The envelope for the view: embedded images become data URLs it can load."""
        data = envelope.get("data")
        if self.host.mode != "embedded" or not isinstance(data, dict):
            return envelope
        if data.get("images"):
            images = [self.host.image_source(str(p)) for p in data["images"]]
            return {**envelope, "data": {**data, "images": images}}
        return envelope

    # --- display

    def attach_widget(self) -> Any:
        """Create the widget for this run."""
        from ..widgets.run_widget import RunWidget

        self.widget = RunWidget(
            self,
            request_id=self.request_id or "",
            mode=self.host.mode,
            prompt=self.prompt,
            snapshot=self.digest.snapshot(),
            waiting=self._waiting,
        )
        return self.widget

    def bundle(self) -> dict[str, Any]:
        """The output: the widget view, with the transcript for where widgets do not render."""
        # Never text/html: a notebook is saved with this, and opened where HTML would run.
        data: dict[str, Any] = {
            "text/plain": self.plain_transcript(),
            "text/markdown": self.markdown(),
        }
        if self.widget is not None:
            view, _metadata = self.widget._repr_mimebundle_()
            data["application/vnd.jupyter.widget-view+json"] = view[
                "application/vnd.jupyter.widget-view+json"
            ]
        return data

    def show(self) -> None:
        """Display the widget (and transcript) in the current output."""
        from IPython.display import display

        if self.widget is None:
            self.attach_widget()
        self._display = display(self.bundle(), raw=True, display_id=True)  # type: ignore[no-untyped-call]
