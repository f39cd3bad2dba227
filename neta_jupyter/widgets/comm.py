"""The run widget's contract with its views: the synced traits and the custom comm messages.

Its twin is ``js/src/comm.ts``. Both are typed from one JSON Schema, made of these models and the
crew board's (:mod:`.board`) by :mod:`.schema` and committed as
``js/schema/comm.schema.json`` (``python -m neta_jupyter.widgets --comm-schema``): the TypeScript
types are generated from it, and tests on both sides check that each side's messages are the
schema's. Like the event protocol, kinds and fields are only ever added; each side ignores, with a
warning, a message whose ``kind`` it does not know.

Kernel → view (:data:`KernelMessage`)
    ``events``  envelopes of a run, at most one message per :data:`~.run_widget.BATCH_INTERVAL`
    ``error``   an action failed or a message was refused
View → kernel (:data:`ViewMessage`)
    ``replay``       send a run's events after ``lastSeq``, then its live ones
    ``unsubscribe``  stop sending a child run's events (its view closed)
    ``action``       act on a run (:data:`Action`: resume, terminate, suspend, retry, input),
                     with the body of the run API's action of that name

A view follows the widget's own run, and may follow other runs it names, the children the run
delegated to: their ``events`` and ``error`` messages carry the ``requestId`` of the run they are
about; a message without one is about the widget's own run.

Exceptions (who raises → who catches)::

    ViewMessageError    raised by parse_view_message, caught by the widget
    ├── UnknownKind     a kind this kernel does not know: logged, ignored
    └── BadMessage      a known kind with fields it cannot use: logged, answered with ``error``
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from pydantic.alias_generators import to_camel

from ..runtime.requests import InputRequest, RequestRef, ResumeRequest

__all__ = [
    "Action",
    "BadMessage",
    "ErrorMessage",
    "EventsMessage",
    "InputAction",
    "KernelMessage",
    "ReplayMessage",
    "ResumeAction",
    "RetryAction",
    "Snapshot",
    "SuspendAction",
    "TerminateAction",
    "UnknownKind",
    "UnsubscribeMessage",
    "ViewMessage",
    "ViewMessageError",
    "WidgetTraits",
    "outgoing",
    "parse_view_message",
]


class _Message(BaseModel):
    """camelCase on the wire, snake_case here; unknown fields ignored (they are only added)."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        frozen=True,
        use_attribute_docstrings=True,
    )


# --- kernel → view ------------------------------------------------------------------------


class EventsMessage(_Message):
    """Envelopes of a run (the run API's event stream), in seq order, each at most once."""

    kind: Literal["events"]
    events: list[dict[str, Any]]
    """The envelopes, as the run API's event stream carries them."""
    request_id: str | None = None
    """The run they belong to, when it is not the widget's own (a child run the view follows)."""


class ErrorMessage(_Message):
    """An action failed, a run cannot be followed, or a message was refused."""

    kind: Literal["error"]
    message: str
    """What went wrong, for the user."""
    request_id: str | None = None
    """The run it is about, when it is not the widget's own."""


KernelMessage = Annotated[EventsMessage | ErrorMessage, Field(discriminator="kind")]
"""What the kernel sends a view."""


# --- view → kernel ------------------------------------------------------------------------


class ReplayMessage(_Message):
    """Send a run's events after ``lastSeq``, then its live events (a view starts or reconnects)."""

    kind: Literal["replay"]
    last_seq: int = -1
    """Highest seq the view has; -1 for none."""
    request_id: str | None = None
    """Another run to follow (a child of the widget's run); absent for the widget's own."""


class UnsubscribeMessage(_Message):
    """Stop sending a child run's events: its view was closed."""

    kind: Literal["unsubscribe"]
    request_id: str
    """The run a ``replay`` subscribed to."""


class _ActionMessage(BaseModel):
    """An action of the run API, as a view sends it: the action's request body, named."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["action"]


class ResumeAction(ResumeRequest, _ActionMessage):
    """Continue a suspended run: with the decision or answer its ask waits for, if it has one."""

    action: Literal["resume"]


class TerminateAction(RequestRef, _ActionMessage):
    """Stop a running or suspended run."""

    action: Literal["terminate"]


class SuspendAction(RequestRef, _ActionMessage):
    """Pause a running run at its next step boundary (resume continues it)."""

    action: Literal["suspend"]


class RetryAction(RequestRef, _ActionMessage):
    """Continue a recoverable failure from its last completed step."""

    action: Literal["retry"]


class InputAction(InputRequest, _ActionMessage):
    """Add input the run reads at its next step."""

    action: Literal["input"]


Action = Annotated[
    ResumeAction | TerminateAction | SuspendAction | RetryAction | InputAction,
    Field(discriminator="action"),
]
"""What the user asks of a run; the run API's action of the same name does it."""

ViewMessage = Annotated[ReplayMessage | UnsubscribeMessage | Action, Field(discriminator="kind")]
"""What a view sends the kernel."""


# --- traits ---------------------------------------------------------------------------------


class Snapshot(_Message):
    """A small summary of the run, kept current by both sides, so a saved notebook keeps it."""

    request_id: str
    """The run."""
    status: Literal["idle", "running", "suspended", "completed", "failed"]
    """Where it is."""
    final_text: str
    """Its answer so far."""
    last_seq: int
    """Seq of the last event it reflects; -1 before the first."""
    error_message: str | None = None
    """Why it failed."""
    suspend_reason: str | None = None
    """Why a suspended run waits (a ``suspendReason.type``), so a reload labels it at once."""


class WidgetTraits(BaseModel):
    """The widget model's synced state (trait names as in Python: the views read them so)."""

    model_config = ConfigDict(extra="ignore", frozen=True, use_attribute_docstrings=True)

    request_id: str
    """The run shown; empty until it has started."""
    mode: Literal["server", "embedded"]
    """``server``: a view on a Jupyter page follows the run on the server itself; ``embedded``
    (or a page without a server): events and actions go over the comm."""
    prompt: str
    """The user's prompt."""
    snapshot: Snapshot | dict[str, Any] = Field(title="SnapshotTrait")
    """The run's summary; empty before the first."""
    waiting: str = ""
    """What a queued prompt waits for before its run starts (an earlier prompt of its
    conversation, and what that one waits for); empty once it has started, or when not queued."""


# --- reading and writing ----------------------------------------------------------------------


class ViewMessageError(ValueError):
    """A view's message this kernel cannot act on."""

    def __init__(self, message: str, kind: object) -> None:
        super().__init__(message)
        self.kind = kind


class UnknownKind(ViewMessageError):
    """A ``kind`` (or action) this kernel does not know: a newer view, ignored."""


class BadMessage(ViewMessageError):
    """A known kind whose fields are missing or of the wrong type."""


_VIEW_MESSAGE: TypeAdapter[ViewMessage] = TypeAdapter(ViewMessage)
_KINDS = frozenset({"replay", "unsubscribe", "action"})
_ACTIONS = frozenset(
    get_args(m.model_fields["action"].annotation)[0]
    for m in (ResumeAction, TerminateAction, SuspendAction, RetryAction, InputAction)
)


def parse_view_message(content: object) -> ViewMessage:
    """The typed message a view sent; raises :class:`ViewMessageError` for one to refuse."""
    if not isinstance(content, dict):
        raise UnknownKind("a message that is not an object", None)
    kind = content.get("kind")
    if kind not in _KINDS or (kind == "action" and content.get("action") not in _ACTIONS):
        what = f"action {content.get('action')!r}" if kind == "action" else f"kind {kind!r}"
        raise UnknownKind(f"a message of unknown {what}", kind)
    try:
        return _VIEW_MESSAGE.validate_python(content)
    except ValidationError as exc:
        tags = 2 if kind == "action" else 1  # the union's tags lead each error's location
        where = (".".join(str(p) for p in e["loc"][tags:]) or "body" for e in exc.errors())
        fields = ", ".join(where)
        raise BadMessage(f"a message of kind {kind!r} with bad fields: {fields}", kind) from exc


def outgoing(message: EventsMessage | ErrorMessage) -> dict[str, Any]:
    """The message as a view receives it (camelCase; absent fields left out)."""
    wire: dict[str, Any] = {"kind": message.kind}
    if isinstance(message, EventsMessage):
        # The envelopes are already wire JSON: passed on as they are, not copied.
        wire["events"] = message.events
    else:
        wire["message"] = message.message
    if message.request_id is not None:
        wire["requestId"] = message.request_id
    return wire
