"""A run's options (what it was started with) and state (where its loop is), typed.

Both are stored with the run's record as JSON documents that carry their ``version``. A document
of an older shape is upgraded step by step when it is read (:func:`upgrade_state`), so a run
stored by an earlier release loads, resumes and retries like a new one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from ...events import Usage
from ...events.runs import OriginKind, PendingAsk, RunOrigin, StartedFrom
from ...providers.base import THINKING_LEVELS, ThinkingLevel, ToolCall, as_thinking_level
from ..errors import BadRunRequest
from .snapshots import SnapshotInvalid, check_document, describe
from .steps import BuildRequest, StoredStep
from .values import KeptReply, RepeatedCalls, VirtualTool

OPTIONS_VERSION = 1
STATE_VERSION = 2

CallsOf = Callable[[str, str | None], tuple[list[ToolCall], set[str]]]
"""``(reply_id, leaf)`` → the reply's tool calls and the ids of those answered on the path to
``leaf``: what upgrading the state of a run stopped among its tool calls needs to know."""

Approve = Literal["ask", "auto", "deny"]
APPROVE_MODES: tuple[Approve, ...] = get_args(Approve)
"""Every ``approve`` mode, for checking a value that is not typed yet."""


CREW_CALL_PREFIX = "crew:"
"""How a crew's task names itself where a sub-agent names its parent's call."""

RunKind = Literal["top", "subagent", "crew_task", "mcp"]
"""Where a run sits: started by a request (``top``, compaction included), a child of a
``delegate`` call (``subagent``), an attempt at a task of a crew (``crew_task``), or the session
of an outside agent calling neta's tools through its MCP server (``mcp``)."""


class McpClient(BaseModel):
    """The outside agent an ``mcp`` run serves, as its MCP ``initialize`` named it."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    name: str
    """The client's name (``claude-code``)."""
    version: str = ""
    """Its version, as it gave it."""


class Delegated(BaseModel):
    """What a sub-agent was asked, by which call of which batch (its parent is on its record)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    parent_tool_call_id: str
    """The parent's ``delegate`` call that started it: a resumed parent finds it by this."""
    batch_id: str
    """The batch of children that call started."""
    agent_id: str
    """Its name within the batch."""
    index: int
    """Its place in the batch (the order of the call's tasks)."""
    role_prompt: str | None = None
    """Who it is and how it should work (its system prompt's role)."""
    entry_id: str
    """Its ``subagent`` entry in the session tree, above its own entries."""
    depth: int = 1
    """How deep in its tree it is (1: the child of a run a user started)."""


class RunOptions(BaseModel):
    """What a run was started with; it never changes afterwards."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    version: int = OPTIONS_VERSION
    """Shape of the stored document; older shapes are upgraded when read."""
    virtual_tools: list[VirtualTool] = Field(default_factory=list)
    """Tools the caller renders itself, answered with their mock response (seed 003 §8)."""
    tools: list[str] | None = None
    """Names of the tools offered to the model (``None``: the endpoint's or all)."""
    max_steps: int | None = None
    """Model replies at most (``None``: the runtime's limit)."""
    approve: Approve = "ask"
    """What a call that needs permission gets: asked, allowed or denied without asking."""
    kernel_id: str | None = None
    """The notebook kernel the run's kernel tools use."""
    notebook_path: str | None = None
    """The notebook the prompt came from (its folder's ``AGENTS.md`` joins the context)."""
    thinking_level: ThinkingLevel | None = None
    """How hard the model thinks in this run (``None``: the session's level)."""
    kernel_variables: list[str] | None = None
    """The kernel's variables when the prompt was written, one summary line each."""
    kind: RunKind = "top"
    """Where the run sits among runs."""
    delegated: Delegated | None = None
    """A sub-agent's task and place in its batch (``None``: a user started the run)."""
    suspend_timeout: float | None = None
    """Seconds the run may wait for a person before USER_NO_RESPONSE (``None``: the runtime's)."""
    attachments: list[dict[str, Any]] | None = None
    """What the request attached, as it named them (``attachmentId`` or ``url``)."""
    mcp_client: McpClient | None = None
    """The outside agent of an ``mcp`` run (``None`` for every other kind)."""
    origin: StartedFrom | None = None
    """Which of neta's own clients started the run (``None``: another client, or a child)."""

    def to_document(self) -> dict[str, Any]:
        """As stored (camelCase, as the run was requested)."""
        return self.model_dump(mode="json", by_alias=True)

    @model_validator(mode="before")
    @classmethod
    def _kind_of_older_runs(cls, data: Any) -> Any:
        # Runs stored before the kind was kept (the first shape's ``kind`` was "compact", of
        # another meaning): a child's kind is told by its call's id.
        if not isinstance(data, dict) or data.get("kind") in get_args(RunKind):
            return data
        delegated = data.get("delegated")
        if not delegated:
            return {**data, "kind": "top"}
        call = getattr(delegated, "parent_tool_call_id", None) or (
            isinstance(delegated, dict) and delegated.get("parentToolCallId", "")
        )
        crew = isinstance(call, str) and call.startswith(CREW_CALL_PREFIX)
        return {**data, "kind": "crew_task" if crew else "subagent"}


class Ask(BaseModel):
    """The permission ask or question a suspended run waits on."""

    kind: Literal["permission", "question"]
    """``permission``: a decision on a call before it runs; ``question``: an answer to what a
    running call asked (its :class:`~neta_jupyter.tools.scope.RunScope`)."""
    ask_id: str
    """The id the answer must name."""
    tool_call_id: str
    """The call that waits."""
    tool_name: str
    """Its tool."""
    digest: str | None = None
    """Of what the ask showed (:func:`~neta_jupyter.tools.permissions.approval_digest`): the
    call and the state it acts on. ``None`` in asks stored before approvals were bound."""

    def to_wire(self) -> PendingAsk:
        """What clients are told (``pendingAsk``)."""
        return PendingAsk(
            kind="clarify" if self.kind == "question" else "permission",
            ask_id=self.ask_id,
            tool_call_id=self.tool_call_id,
            tool_name=self.tool_name,
        )


class RunState(BaseModel):
    """Everything a later activation of the run needs besides the session tree."""

    version: int = STATE_VERSION
    """Shape of the stored document; older shapes are upgraded when read."""
    step: int = 0
    """Model replies completed."""
    next: StoredStep = Field(default_factory=BuildRequest)
    """The step the next activation starts with (a ``RunTools`` carries the user's decision)."""
    leaf: str | None = None
    """The session-tree entry the conversation continues from."""
    assistant_message_id: str | None = None
    """The entry id announced in SESSION_CREATED for this turn's first reply."""
    assistant_used: bool = False
    """Whether a reply has taken that id yet."""
    last_assistant: str | None = None
    """Entry of the latest reply (the ``messageId`` of terminal events)."""
    ask: Ask | None = None
    """What the run waits on while suspended."""
    recoverable: bool = False
    """The run failed in a way ``retryTask`` can continue."""
    usage: Usage = Field(default_factory=Usage)
    """Token totals of the run."""
    attempt_seq: int = 0
    """Budget checks made (``BUDGET_CHECKED.attemptSeq``)."""
    remind: str | None = None
    """A nudge added to the next request only."""
    failed_tool_steps: int = 0
    """Steps in a row whose tool calls all failed."""
    last_step_failed: bool = False
    """The latest step's tool calls all failed."""
    recovery_asked: bool = False
    """The model was asked once to retry after answering right after a failed step."""
    no_progress_steps: int = 0
    """Steps in a row without answer text or a tool result that did not fail."""
    repeat: RepeatedCalls | None = None
    """The latest step's calls and how many steps in a row made exactly them."""
    subagents_counted: list[str] = Field(default_factory=list)
    """Sub-agents whose tokens are already in ``usage``."""
    kept_reply: KeptReply | None = None
    """What clients saw of a reply cut off mid-stream, so asking again does not repeat it."""
    background: str | None = None
    """The tool call whose work runs in the background while the run waits (suspended with
    ASYNC_TOOL_PENDING); the run goes on by itself when it ends."""
    suspend_deadline: float | None = None
    """While it is suspended waiting for a person: when it is reclaimed with USER_NO_RESPONSE
    (seconds since the epoch; kept here so a restarted server still reclaims it)."""
    notebook_map: str | None = None
    """A notebook-bound run's map of its notebook, as it was when the prompt was sent."""
    cells_seen: dict[str, str] = Field(default_factory=dict)
    """By cell id, the hash of the version of the cell the run last saw (``RunNotebook.seen``)."""

    def to_document(self) -> dict[str, Any]:
        """As stored."""
        return self.model_dump(mode="json")


def new_options(
    *,
    virtual_tools: list[dict[str, Any]] | None,
    tools: list[str] | None,
    max_steps: int | None,
    approve: str,
    kernel_id: str | None,
    notebook_path: str | None,
    thinking_level: str | None,
    kernel_variables: list[str] | None,
    suspend_timeout: float | None = None,
    attachments: list[dict[str, Any]] | None = None,
    origin: StartedFrom | None = None,
) -> RunOptions:
    """The options of a new run, from what its caller asked for; BadRunRequest if they are bad."""
    try:
        declared = [VirtualTool.model_validate(v) for v in virtual_tools or []]
    except ValidationError as exc:
        raise BadRunRequest(f"invalid virtualTools: {exc}", code="INVALID_VIRTUAL_TOOLS") from exc
    if approve not in APPROVE_MODES:
        raise BadRunRequest("approve must be ask, auto or deny", code="INVALID_APPROVE")
    check_thinking_level(thinking_level)
    if suspend_timeout is not None and not suspend_timeout > 0:
        raise BadRunRequest(
            "suspendTimeout must be above 0 seconds", code="INVALID_SUSPEND_TIMEOUT"
        )
    return RunOptions(
        virtual_tools=declared,
        tools=tools,
        max_steps=max_steps,
        approve=approve,
        kernel_id=kernel_id,
        notebook_path=notebook_path,
        thinking_level=as_thinking_level(thinking_level),
        kernel_variables=kernel_variables,
        suspend_timeout=suspend_timeout,
        attachments=attachments or None,
        origin=origin,
    )


_ORIGIN_OF_KIND: dict[str, OriginKind] = {
    "subagent": "subagent",
    "crew_task": "crew",
    "mcp": "mcp",
}


def origin_of(options: RunOptions) -> RunOrigin:
    """Where a run came from, as its options tell: its kind, the client that said, or ``api``."""
    kind = _ORIGIN_OF_KIND.get(options.kind) or options.origin or "api"
    client = options.mcp_client.name if options.mcp_client is not None else None
    return RunOrigin(kind=kind, notebook_path=options.notebook_path, client=client)


def check_thinking_level(level: str | None) -> None:
    """BadRunRequest unless ``level`` is a thinking level (or ``None``)."""
    if level is not None and level not in THINKING_LEVELS:
        raise BadRunRequest(
            f"thinking level must be one of {', '.join(THINKING_LEVELS)}, got {level!r}",
            code="INVALID_THINKING_LEVEL",
        )


def load_options(document: dict[str, Any]) -> RunOptions:
    """Options as stored, of any version (the first shape had the same keys, no version).

    SnapshotInvalid when they cannot be loaded (likewise :func:`load_state`).
    """
    check_document("options", document, OPTIONS_VERSION)
    try:
        return RunOptions.model_validate(document)
    except ValidationError as exc:
        raise SnapshotInvalid(describe("options", exc)) from exc


def no_calls(reply_id: str, leaf: str | None) -> tuple[list[ToolCall], set[str]]:
    """For a state that needs no tool calls to be upgraded (see :func:`calls_needed`)."""
    raise LookupError(f"the calls of {reply_id} were not read before upgrading the state")


def calls_needed(document: dict[str, Any]) -> tuple[str, str | None] | None:
    """``(reply_id, leaf)`` when upgrading the document needs that reply's calls, else None."""
    version = document.get("version")
    older = isinstance(version, int | None) and (version or 0) < 2  # the first: no version
    if older and document.get("phase") == "tools" and document.get("last_assistant"):
        return str(document["last_assistant"]), document.get("leaf")
    return None


def load_state(document: dict[str, Any], calls_of: CallsOf = no_calls) -> RunState:
    """State as stored, of any version."""
    check_document("state", document, STATE_VERSION)
    try:
        return RunState.model_validate(upgrade_state(document, calls_of))
    except (ValidationError, LookupError, TypeError, ValueError, AttributeError) as exc:
        raise SnapshotInvalid(describe("state", exc)) from exc


def upgrade_state(document: dict[str, Any], calls_of: CallsOf) -> dict[str, Any]:
    """The document in the current shape."""
    doc = dict(document)
    if doc.get("version") is None:
        doc = _state_from_first_shape(doc)
    if doc["version"] == 1:
        doc = _state_from_phases(doc, calls_of)
    return doc


def _state_from_first_shape(doc: dict[str, Any]) -> dict[str, Any]:
    """The first stored shape: a plain dict, camelCase ask and usage, other names for two keys."""
    if isinstance(ask := doc.get("ask"), dict):
        doc["ask"] = {
            "kind": ask.get("kind", "permission"),
            "ask_id": ask.get("askId"),
            "tool_call_id": ask.get("toolCallId"),
            "tool_name": ask.get("toolName"),
        }
    if isinstance(guard := doc.pop("guard", None), dict):
        doc["verdict"] = guard
    if isinstance(kept := doc.pop("shown_of_step", None), dict):
        doc["kept_reply"] = {
            "step": kept.get("step"),
            "text": kept.get("text") or "",
            "reasoning": kept.get("reasoning") or "",
            "tool_calls": kept.get("toolCalls") or [],
        }
    doc["version"] = 1
    return doc


def _state_from_phases(doc: dict[str, Any], calls_of: CallsOf) -> dict[str, Any]:
    """Version 1 named a phase and kept every decision by call id; version 2 keeps the step."""
    if isinstance(ask := doc.get("ask"), dict) and ask.get("kind") == "clarify":
        doc["ask"] = {**ask, "kind": "question"}
    phase = doc.pop("phase", "model")
    decisions: dict[str, bool] = doc.pop("decisions", None) or {}
    answers: dict[str, str] = doc.pop("answers", None) or {}
    verdict = doc.pop("verdict", None)
    reply_id = doc.get("last_assistant")
    if phase == "tools" and reply_id:
        calls, answered = calls_of(reply_id, doc.get("leaf"))
        # Decisions are made one at a time and the decided call runs next: the one decided
        # call without a result is the one the run was resumed for.
        resumed: dict[str, Any] | None = None
        for call in calls:
            if call.id in answered:
                continue
            if call.id in answers:
                resumed = {"kind": "answer", "tool_call_id": call.id, "text": answers[call.id]}
            elif call.id in decisions:
                approved = decisions[call.id]
                resumed = {"kind": "approval", "tool_call_id": call.id, "approved": approved}
            if resumed is not None:
                break
        same_step = isinstance(verdict, dict) and verdict.get("step") == doc.get("step")
        ask = doc.get("ask")
        waiting = (
            ask["tool_call_id"] if isinstance(ask, dict) and ask["kind"] == "question" else None
        )
        if resumed is not None and resumed["kind"] == "answer":
            waiting = resumed["tool_call_id"]
        doc["next"] = {
            "kind": "run_tools",
            "reply_id": reply_id,
            "calls": calls,
            "verdict": verdict if same_step else None,
            "resumed": resumed,
            "waiting": waiting,
        }
    else:
        doc["next"] = {"kind": "build_request"}
    doc["version"] = 2
    return doc
