"""The run API's request bodies: one pydantic model per action, wherever the action comes from.

The server validates REST bodies and WebSocket frames with these models, the OpenAPI document
describes them, and the run-API client (:mod:`neta_jupyter.client`) sends them over either of its
transports. A run option added to :class:`RunRequest` (and taken by :meth:`Runtime.start`) is
therefore accepted by the server, sent by the kernel hosts and the terminal client, and
documented, with no other change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from ..events.runs import StartedFrom
from ..providers.base import ThinkingLevel
from .data.state import APPROVE_MODES, Approve
from .data.values import AttachmentRef
from .imports import MAX_IMPORTED_CALLS, ImportedCall

if TYPE_CHECKING:
    from .data.runs import Run
    from .manager import Runtime

__all__ = [
    "APPROVE_MODES",
    "Approve",
    "AttachmentRef",
    "CompactRequest",
    "ImportRequest",
    "InputRequest",
    "InsertRequest",
    "LeafRequest",
    "RequestRef",
    "ResumeRequest",
    "RevertRequest",
    "RunRequest",
    "SessionRef",
    "SessionSubscription",
    "StartRequest",
    "ThinkingLevelRequest",
    "VirtualToolSpec",
    "describe_validation",
    "resume_run",
    "retry_run",
    "start_run",
]


_PRINTABLE = r"^[^\x00-\x1f\x7f]*$"
"""No NUL or other control character: a name for the file system or the kernel manager."""


class _Body(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        use_attribute_docstrings=True,
    )


class VirtualToolSpec(_Body):
    """A caller-rendered tool (seed 003 §8)."""

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z_][A-Za-z0-9_\-]*$")
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    mock_response: str | None = None


class RunRequest(_Body):
    """``POST /neta/api/agent/run/async``: a prompt and the options of the run it starts.

    Every field but ``content`` is passed by name to :meth:`Runtime.start`.
    """

    content: str = Field(min_length=1)
    session_id: str | None = None
    session_name: str | None = Field(default=None, max_length=500)
    model: str | None = None
    virtual_tools: list[VirtualToolSpec] = Field(default_factory=list)
    tools: list[str] | None = None
    max_steps: int | None = Field(default=None, ge=1, le=200)
    approve: Approve = "ask"
    """Tools that need permission: ``ask`` the user, allow them all (``auto``) or ``deny`` them."""
    kernel_id: str | None = Field(default=None, min_length=1, max_length=200, pattern=_PRINTABLE)
    """A kernel of the server (the notebook's), whose kernel tools the run may use."""
    notebook_path: str | None = Field(
        default=None, min_length=1, max_length=4096, pattern=_PRINTABLE
    )
    """A notebook under the server root (relative, or absolute inside the root): the notebook
    tools change it."""
    thinking_level: ThinkingLevel | None = None
    """Overrides the session's thinking level for this run."""
    kernel_variables: list[Annotated[str, Field(max_length=2000)]] | None = Field(
        default=None, max_length=1000
    )
    """The kernel's variables when the prompt was written, one summary line each (``%neta``
    sends them): the model's context, and ``list_variables`` while a cell keeps the kernel busy."""
    suspend_timeout: float | None = Field(default=None, gt=0, le=366 * 86_400)
    """Seconds the run may wait for a person (an approval, an answer, a resume after a pause)
    before it is stopped with USER_NO_RESPONSE; the server's ``suspend_timeout`` when absent."""
    attachments: list[AttachmentRef] | None = Field(default=None, max_length=50)
    """Files the model is shown with the prompt: uploads by ``attachmentId``, or ``url`` s the
    server downloads when the run begins."""
    origin: StartedFrom | None = None
    """Which of neta's own clients starts the run (``cell``, ``terminal``, ``panel``): the run
    list says so (``origin``); another client leaves it out."""

    def start_options(self) -> dict[str, Any]:
        """The keyword arguments of :meth:`Runtime.start` (every field but ``content``)."""
        options = {name: getattr(self, name) for name in RunRequest.model_fields}
        del options["content"]
        options["virtual_tools"] = [v.model_dump(by_alias=True) for v in self.virtual_tools]
        if self.attachments is not None:
            options["attachments"] = [
                a.model_dump(by_alias=True, exclude_none=True) for a in self.attachments
            ]
        return options


class StartRequest(RunRequest):
    """``POST …/run/async`` and the WebSocket ``chat``: a run, from another entry if one is named.

    Only :class:`RunRequest`'s fields are the run's options.
    """

    leaf_entry_id: str | None = None
    """Continue the session (``sessionId``) from this entry of its tree, as ``…/sessions/leaf``."""


class RevertRequest(_Body):
    """``POST /neta/api/notebook/revert``: undo one notebook edit.

    Name the edit, or a notebook: then the last edit not yet reverted of the caller's latest run
    started from it (``%neta undo``).
    """

    edit_id: str | None = Field(default=None, min_length=1, max_length=200)
    notebook_path: str | None = Field(
        default=None, min_length=1, max_length=4096, pattern=_PRINTABLE
    )

    @model_validator(mode="after")
    def _one_target(self) -> RevertRequest:
        if (self.edit_id is None) == (self.notebook_path is None):
            raise ValueError("give exactly one of editId and notebookPath")
        return self


class InsertRequest(_Body):
    """``POST /neta/api/notebook/insert``: a run's answer, or its code, as a new cell.

    The cell goes at the end of the notebook, with the run in its ``metadata.neta`` as the cells
    its notebook tools write, and is one of the run's edits (listed, and reverted like them).
    """

    request_id: str = Field(min_length=1, max_length=200)
    """The run the cell comes from (the caller's)."""
    notebook_path: str = Field(min_length=1, max_length=4096, pattern=_PRINTABLE)
    """A notebook under the server root."""
    cell_type: Literal["markdown", "code"]
    source: str = Field(min_length=1, max_length=1_000_000)


class ThinkingLevelRequest(_Body):
    """``POST /neta/api/sessions/thinkingLevel`` and the WebSocket ``set_thinking_level``."""

    session_id: str = Field(min_length=1)
    level: ThinkingLevel | None
    """``None`` goes back to the endpoint's default."""


class RequestRef(_Body):
    """Bodies that only name a run."""

    request_id: str = Field(min_length=1)
    """The run."""


class ResumeRequest(RequestRef):
    """``POST …/resumeTask``: continue a suspended run, with what its ask waits for if any."""

    approved: bool | None = None
    """The decision on a permission ask."""
    ask_id: str | None = None
    """The permission ask's ``askId``, or the question's ``clarifyId``."""
    always: bool = False
    """Allow calls like this one for the rest of the session."""
    answer: str | None = None
    """The answer to a question."""
    digest: str | None = Field(default=None, max_length=128)
    """The ``digest`` of the permission ask as it was shown: a decision on anything else is
    refused (409 ASK_CHANGED)."""


class InputRequest(RequestRef):
    """``POST …/addSupplementaryInput``: input the run reads at its next step."""

    content: str = Field(min_length=1)
    """The input."""


class ImportRequest(_Body):
    """``POST …/run/import``: a history run with messages and no stream."""

    session_name: str = Field(min_length=1)
    content: str = Field(min_length=1)
    answer: str
    tool_calls: list[ImportedCall] = Field(default_factory=list, max_length=MAX_IMPORTED_CALLS)
    """The tool calls the run made, as the history recorded them."""


class SessionRef(_Body):
    """Bodies that only name a session (the WebSocket ``unsubscribe_session``)."""

    session_id: str = Field(min_length=1)


class SessionSubscription(SessionRef):
    """The WebSocket ``subscribe_session``: follow a session's tree events."""

    last_event_id: int | str | None = None
    """The seq of the last event of the session's stream already seen (``lastSeq`` of the tree
    snapshot, or of the last event received)."""


class LeafRequest(_Body):
    """``POST /neta/api/sessions/leaf``."""

    session_id: str
    leaf_entry_id: str | None


class CompactRequest(_Body):
    """``POST /neta/api/sessions/compact`` and the WebSocket ``compact`` message."""

    session_id: str = Field(min_length=1)
    instructions: str | None = None
    model: str | None = None


def describe_validation(exc: ValidationError) -> str:
    """One line naming each bad field."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "body"
        parts.append(f"{where}: {err['msg']}")
    return "invalid request: " + "; ".join(parts)


async def start_run(runtime: Runtime, principal: str, body: RunRequest) -> Run:
    """Start a run from a validated request body (other servers learn where its kernel is)."""
    if runtime.targets is not None:
        await runtime.targets.check(principal, body.kernel_id, body.notebook_path)
    run = await runtime.start(principal, body.content, **body.start_options())
    await runtime.takeover.handoff.bound(run)
    return run


async def resume_run(runtime: Runtime, principal: str, body: ResumeRequest) -> Run:
    """Resume a run (a permission decision, an answer, or after a shutdown).

    On the server hosting the run's kernel, when another one does.
    """
    decision: dict[str, Any] = {
        "approved": body.approved,
        "ask_id": body.ask_id,
        "always": body.always,
        "answer": body.answer,
        "digest": body.digest,
    }
    handoff = runtime.takeover.handoff
    handed = await handoff.elsewhere(principal, body.request_id, "resume", decision)
    if handed is not None:
        return handed
    return await runtime.resume(principal, body.request_id, **decision)


async def retry_run(runtime: Runtime, principal: str, body: RequestRef) -> Run:
    """Retry a run that failed recoverably, on the server hosting its kernel if another one."""
    handed = await runtime.takeover.handoff.elsewhere(principal, body.request_id, "retry", {})
    return handed if handed is not None else await runtime.retry(principal, body.request_id)
