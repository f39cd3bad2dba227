"""How the answer to a suspended run's pending ask joins the step the run waits in."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ...events import EventType, PermissionResolvedData
from ...store import RecordStore
from ..data.runs import Run
from ..data.state import Ask
from ..data.steps import Answer, Approval, RunTools
from ..errors import BadRunRequest, RunConflict
from ..log.emitter import RunEmitter

NO_ANSWER = "The user chose not to answer."


async def decide_ask(
    run: Run,
    *,
    ask_id: str | None,
    approved: bool | None,
    always: bool,
    answer: str | None,
    records: RecordStore,
    emitter: Callable[[], Awaitable[RunEmitter]],
    digest: str | None = None,
) -> None:
    """The decision on the run's pending ask, if it has one, joins the step it waits in."""
    ask = run.state.ask
    if ask is not None and ask.kind == "question":
        answer_question(run, ask, ask_id=ask_id, approved=approved, answer=answer)
    elif ask is not None:
        await decide_permission(
            run,
            ask,
            ask_id=ask_id,
            approved=approved,
            always=always,
            records=records,
            emitter=await emitter(),
            digest=digest,
        )


def answer_question(
    run: Run, ask: Ask, *, ask_id: str | None, approved: bool | None, answer: str | None
) -> None:
    """The user's answer to the question a call asked (``approved=False``: they declined)."""
    if ask_id is not None and ask_id != ask.ask_id:
        raise RunConflict(f"{ask_id!r} is not the pending question", code="ASK_MISMATCH")
    if answer is None and approved is not False:
        raise BadRunRequest("answer is required to reply to a question", code="ANSWER_REQUIRED")
    text = answer if answer is not None else NO_ANSWER
    _resume_with(run, Answer(tool_call_id=ask.tool_call_id, text=text))


async def decide_permission(
    run: Run,
    ask: Ask,
    *,
    ask_id: str | None,
    approved: bool | None,
    always: bool,
    records: RecordStore,
    emitter: RunEmitter,
    digest: str | None = None,
) -> None:
    """The user's decision on a call's permission ask (``always``: for the session's rest).

    ``digest``: of what the user was shown (the ask's ``digest``); a decision on anything else
    is refused and the ask stays open.
    """
    if ask_id is not None and ask_id != ask.ask_id:
        raise RunConflict(f"askId {ask_id!r} is not the pending ask", code="ASK_MISMATCH")
    if digest is not None and ask.digest is not None and digest != ask.digest:
        raise RunConflict(
            f"the decision is on something other than what ask {ask.ask_id} shows; the ask "
            "stays open",
            code="ASK_CHANGED",
        )
    if approved is None:
        raise BadRunRequest(
            "approved (true or false) is required to answer a permission ask",
            code="APPROVED_REQUIRED",
        )
    _resume_with(run, Approval(tool_call_id=ask.tool_call_id, approved=approved, digest=ask.digest))
    if always and approved:
        await records.allow_always(run.session_id, ask.tool_name)
    emitter.emit(
        EventType.PERMISSION_ASK_RESOLVED,
        PermissionResolvedData(
            ask_id=ask.ask_id,
            approved=approved,
            reason="user",
            resolve_type="always" if always and approved else "once",
        ),
    )


def _resume_with(run: Run, decision: Answer | Approval) -> None:
    """The run's kept step goes on with the user's decision; the ask is answered."""
    pending = run.state.next
    assert isinstance(pending, RunTools), "a run waits on an ask only among its tool calls"
    run.state.next = pending.model_copy(update={"resumed": decision})
    run.state.ask = None
