"""The ``RunTools`` step: a reply's tool calls, permission first, each result persisted.

A call runs when the permission rules allow it, or when the step was resumed with the user's
approval of it; an ASK suspends the run with the step kept (its decision arrives with the
resume). A tool may suspend the run itself through its :class:`~.scope.CallScope` (a question
for the user); it then runs again, from the top, when the run resumes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from ...events import (
    EventType,
    FinishReason,
    PermissionAskData,
    StatusCode,
    SuspendReason,
    SuspendType,
)
from ...providers.base import ToolCall
from ...store import Entry, new_id
from ...tools import Decision, RunSuspended, Tool, ToolContext, decide
from ...tools.files import rule_arguments
from ...tools.permissions import approval_digest, stricter
from ...tools.registry import KernelBridge, RunNotebook
from ...tools.values import ToolError
from ..config import TOOL_FAILURE_REMINDER
from ..data.state import Ask
from ..data.steps import Answer, Approval, BuildRequest, Finish, RunTools, Suspend
from ..data.values import VirtualTool
from ..log.emitter import status
from ..log.tree import CallOutcome
from .guards import announce_repeats, screen_step
from .ports import LOST, Delegation, Jobs
from .scope import CallScope
from .tooling import Outcome, ToolRunner
from .turn import Turn


class ToolStep:
    """Runs ``RunTools`` steps for one activation."""

    def __init__(
        self,
        turn: Turn,
        *,
        tools: dict[str, Tool],
        kernel: KernelBridge | None,
        runner: ToolRunner,
        subagents: Delegation | None = None,
        notebook: RunNotebook | None = None,
        jobs: Jobs | None = None,
    ) -> None:
        self._turn = turn
        self._jobs = jobs
        self._tools = tools
        self._virtual: dict[str, VirtualTool] = {v.name: v for v in turn.run.options.virtual_tools}
        self._kernel = kernel
        self._notebook = notebook
        self._runner = runner
        self._subagents = subagents
        self.deadline: float | None = None
        """When the activation's time runs out (the event loop's clock; ``None``: never)."""
        self.results: list[bool] = []
        """Whether each call answered by the latest step succeeded (refusals count as failed)."""
        self._denied = False
        """A call of the latest step was denied (by the user or a rule)."""

    @property
    def offered(self) -> list[str]:
        """Every tool name the model may call."""
        return sorted([*self._tools, *self._virtual])

    async def run(
        self, step: RunTools, pause: Callable[[], SuspendReason | None] = lambda: None
    ) -> RunTools | BuildRequest | Suspend | Finish:
        """Run the step's calls that have no result yet (``pause``: stop between two of them)."""
        turn, state = self._turn, self._turn.run.state
        reply = await turn.records.get_entry(step.reply_id)
        assert reply is not None, "a RunTools step follows a persisted reply"
        answered = await self._answered(reply)
        verdict = step.verdict or screen_step(state, turn.config, step.calls)
        outcomes: list[bool] = []
        self.results, self._denied = [], False
        for call in step.calls:
            if call.id in answered:
                continue
            if outcomes and (reason := pause()) is not None:
                # The calls that ran are answered; the others run when the run is resumed.
                update = {"verdict": verdict, "resumed": None, "waiting": None}
                state.next = step.model_copy(update=update)
                return Suspend(reason)
            if (refusal := verdict.refused.get(call.id)) is not None:
                output, ok = self._runner.fail_without_running(call, refusal)
            else:
                outcome = await self._one_call(call, step)
                if isinstance(outcome, Suspend):
                    # Kept for the resume, which brings the decision the call waits on; a call
                    # that suspended the run itself (it did not ask permission) runs again.
                    asked = state.ask is not None and state.ask.kind == "permission"
                    state.next = step.model_copy(
                        update={
                            "verdict": verdict,
                            "resumed": None,
                            "waiting": None if asked else call.id,
                        }
                    )
                    return outcome
                output, ok = outcome
                outcomes.append(ok)
            meta = self._runner.take_meta(call.id)
            ended: CallOutcome = "completed" if ok else "failed"
            await turn.answer(reply, call.id, call.name, output, ended, meta=meta)
            self.results.append(ok)
            await turn.emitter.flush()
        reminded = await self._track_failures(outcomes)
        if verdict.stop:
            text = verdict.stop_text()
            return await turn.finish_with_notice(FinishReason.REPEATED_TOOL_CALLS, text)
        if verdict.remind and not reminded:
            # The failure reminder, when due, already says not to repeat the call.
            state.remind = verdict.reminder()
            await announce_repeats(turn.emitter, verdict, turn.config.max_repeated_calls)
        return BuildRequest()

    async def _answered(self, reply: Entry) -> set[str]:
        path = await self._turn.records.path(self._turn.run.session_id, self._turn.run.state.leaf)
        ids = [e.entry_id for e in path]
        after = path[ids.index(reply.entry_id) + 1 :] if reply.entry_id in ids else []
        return {e.message.get("tool_call_id", "") for e in after if e.role == "tool"}

    async def _track_failures(self, outcomes: list[bool]) -> bool:
        """Count steps whose calls all failed; past the threshold, remind the model (once)."""
        state, limit = self._turn.run.state, self._turn.config.max_failed_tool_steps
        # A call the user or a rule denied is no failure to retry.
        state.last_step_failed = bool(outcomes) and not any(outcomes) and not self._denied
        failed = state.failed_tool_steps + 1 if state.last_step_failed else 0
        state.failed_tool_steps = failed
        if failed < limit:
            return False
        state.failed_tool_steps = 0
        state.remind = TOOL_FAILURE_REMINDER
        state.recovery_asked = True  # told to explain the problem: its answer is not asked again
        await status(
            self._turn.emitter,
            StatusCode.TOOL_CONSECUTIVE_FAILURES,
            f"Tool calls failed in {failed} steps in a row; reminding the model to change tack",
            failedSteps=failed,
            maxFailedSteps=limit,
        )
        return True

    async def _one_call(self, call: ToolCall, step: RunTools) -> Outcome | Suspend:
        if call.name in self._virtual:
            return await self._runner.run_virtual(call, self._virtual[call.name])
        if call.id == step.waiting and self._jobs and self._jobs.lost(self._turn.run, call.id):
            # Whatever became of the tool or the kernel since, the model hears what happened.
            self._turn.run.state.background = None
            return self._runner.fail_without_running(call, LOST)
        tool = self._tools.get(call.name)
        if tool is None:
            known = ", ".join(self.offered) or "none"
            return self._runner.fail_without_running(
                call, f"unknown tool {call.name!r}; available tools: {known}"
            )
        resumed = step.resumed if step.resumed and step.resumed.tool_call_id == call.id else None
        again = call.id == step.waiting
        approved: str | None = None
        match resumed:
            case Approval(approved=False):
                self._denied = True
                return self._runner.fail_without_running(
                    call, "the user denied permission to run this tool call"
                )
            case Approval(digest=str(shown)):
                # Allowed as it was shown: if it would now act on something else, ask again.
                outcome = await self._still_approved(call, tool, shown)
                if outcome is not None and not isinstance(outcome, str):
                    return outcome
                approved = outcome
            case Approval():
                pass  # the user allowed it (an ask stored before approvals were bound)
            case Answer() | None if again:
                pass  # it suspended the run while running, so it was allowed to run
            case Answer() | None:
                try:
                    arguments = tool.parse_arguments(call.arguments)
                except ToolError as exc:
                    return self._runner.fail_without_running(call, str(exc))
                if (refused := await self._permission(call, tool, arguments)) is not None:
                    return refused
        answer = resumed.text if isinstance(resumed, Answer) else None
        return await self._execute(call, tool, again=again, answer=answer, approved=approved)

    async def _still_approved(
        self, call: ToolCall, tool: Tool, shown: str
    ) -> str | Outcome | Suspend | None:
        """``shown`` while the call would still do what the user approved.

        Otherwise what the rules say now: ``None`` (allowed as it is), a refusal, or a new ask.
        """
        try:
            arguments = tool.parse_arguments(call.arguments)
        except ToolError as exc:
            return self._runner.fail_without_running(call, str(exc))
        state = await self._binding(call, tool, arguments)
        if approval_digest(call.name, call.arguments, state) == shown:
            return shown
        return await self._permission(call, tool, arguments, changed=True)

    async def _binding(self, call: ToolCall, tool: Tool, arguments: dict[str, Any]) -> str | None:
        """The state the call would act on now (``Tool.binding``)."""
        if tool.binding is None:
            return None
        try:
            return await tool.binding(self._context(call, again=False, answer=None), arguments)
        except Exception:  # unreadable now: bound to that, so a readable state differs
            return None

    def _context(
        self, call: ToolCall, *, again: bool, answer: str | None, approved: str | None = None
    ) -> ToolContext:
        turn = self._turn
        return ToolContext(
            root_dir=turn.config.root_dir,
            session_id=turn.run.session_id,
            request_id=turn.run.request_id,
            tool_call_id=call.id,
            kernel=self._kernel,
            variables_at_prompt=turn.run.options.kernel_variables,
            kernel_wait=turn.config.kernel_wait,
            execution_timeout=self._execution_timeout(),
            notebook=self._notebook,
            scope=CallScope(
                turn.run,
                call,
                emitter=turn.emitter,
                records=turn.records,
                resumed=again,
                answer=answer,
                delegator=self._subagents.delegator(turn.run, turn.emitter, call.id)
                if self._subagents is not None
                else None,
                jobs=self._jobs,
                background_limit=turn.config.execution_timeout or turn.config.task_timeout,
            ),
            approved=None
            if approved is None
            else lambda state: approval_digest(call.name, call.arguments, state) == approved,
        )

    async def _preview(
        self, call: ToolCall, tool: Tool, arguments: dict[str, Any]
    ) -> dict[str, Any] | None:
        """What the call would change, for its permission prompt (none when it cannot tell)."""
        if tool.preview is None:
            return None
        try:
            return await tool.preview(self._context(call, again=False, answer=None), arguments)
        except Exception:  # a preview is a courtesy: the prompt goes out without one
            return None

    async def _execute(
        self, call: ToolCall, tool: Tool, *, again: bool, answer: str | None, approved: str | None
    ) -> Outcome | Suspend:
        ctx = self._context(call, again=again, answer=answer, approved=approved)
        try:
            # A call that suspended the run already has its card: it goes on in it.
            return await self._runner.run_tool(call, tool, ctx, started=again)
        except RunSuspended as suspended:
            return Suspend(suspended.reason)

    def _execution_timeout(self) -> float | None:
        """The configured limit of one execution, at most the time the activation has left."""
        limit = self._turn.config.execution_timeout
        if self.deadline is None:
            return limit
        left = max(0.0, self.deadline - asyncio.get_running_loop().time())
        return left if limit is None else min(limit, left)

    async def _permission(
        self, call: ToolCall, tool: Tool, arguments: dict[str, Any], *, changed: bool = False
    ) -> Outcome | Suspend | None:
        """None when the call may run; otherwise the denial or the suspension.

        ``changed``: the user approved the call, but what it acts on changed since.
        """
        turn = self._turn
        session = await turn.records.get_session(turn.run.session_id)
        try:
            # A rule on a path holds whichever way the model spells it.
            seen = await rule_arguments(turn.config.root_dir, arguments, tool.path_arguments)
        except ToolError as exc:
            return self._runner.fail_without_running(call, str(exc))
        allowed = frozenset(session.always_allow if session else [])
        rules = turn.config.permission_rules
        decision = decide(rules, call.name, seen, readonly=tool.readonly, always_allowed=allowed)
        if tool.also_does is not None and (other := tool.also_does(arguments)) is not None:
            also = decide(rules, other, seen, readonly=False, always_allowed=allowed)
            decision = stricter(decision, also)
        action = decision.action
        approve = turn.run.options.approve
        if action == "ask" and approve in ("auto", "deny"):
            action = "allow" if approve == "auto" else "deny"
        if action == "allow":
            return None
        if action == "deny":
            self._denied = True
            return self._runner.fail_without_running(
                call, f"not allowed: {decision.rule_description} ({decision.rule_pattern})"
            )
        if changed:
            why = (
                f"it changed after you approved it, so it was not run; {decision.rule_description}"
            )
            decision = Decision(decision.action, why, decision.rule_pattern)
        return await self._ask(call, tool, arguments, decision)

    async def _ask(
        self, call: ToolCall, tool: Tool, arguments: dict[str, Any], decision: Decision
    ) -> Suspend:
        """Ask the user about the call (with a preview of what it would do) and suspend."""
        turn = self._turn
        ask_id = new_id("ask")
        # The preview and the digest are read of the same state; an approval binds to it.
        state = await self._binding(call, tool, arguments)
        digest = approval_digest(call.name, call.arguments, state)
        turn.run.state.ask = Ask(
            kind="permission",
            ask_id=ask_id,
            tool_call_id=call.id,
            tool_name=call.name,
            digest=digest,
        )
        turn.emitter.emit(
            EventType.PERMISSION_ASK,
            PermissionAskData(
                ask_id=ask_id,
                principal_id=turn.run.principal,
                tool_name=call.name,
                tool_call_id=call.id,
                arguments=call.arguments,
                mcp_server=tool.mcp_server,
                mcp_tool=tool.mcp_tool,
                rule_description=decision.rule_description,
                rule_pattern=decision.rule_pattern,
                preview=await self._preview(call, tool, arguments),
                digest=digest,
            ),
        )
        return Suspend(
            SuspendReason(
                type=SuspendType.PERMISSION_ASK,
                ask_id=ask_id,
                message=f"{call.name} needs your approval",
            )
        )
