"""One activation of a run: explicit steps, each returning the next (seed 004's main path).

``CallModel`` streams one reply and persists it; ``RunTools`` executes the reply's tool calls,
persisting each result; the loop ends on ``Suspend`` or ``Finish``. Everything a later activation
needs (step, phase, pending ask, decisions, usage) lives in ``run.state`` and the session tree, so
resume, retry and restart continue from the last completed step without re-running tools.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, assert_never

from ..events import (
    ClarifyData,
    EventType,
    FinishReason,
    PermissionAskData,
    StatusCode,
    SupplementaryInputData,
    SuspendReason,
    SuspendType,
    TextData,
    TodoData,
    TodoItem,
)
from ..events.models import CompactionScope
from ..providers.base import (
    ContextTooLong,
    Message,
    Model,
    ModelRequest,
    ToolCall,
    as_thinking_level,
)
from ..store import Entry, Store, new_id
from ..tools import Tool, ToolContext, ToolError, decide
from ..tools.agent import RUNTIME_TOOL_NAMES
from ..tools.kernel_tools import variables_as_of_prompt
from ..tools.registry import KernelBridge
from . import context
from .budget import BudgetExceeded, Estimate, estimate, publish_decision, reconcile
from .compaction import compact
from .config import MAX_STEPS_TEXT, TOOL_FAILURE_REMINDER, RuntimeConfig
from .emitter import RunEmitter
from .guards import announce_repeats, screen_step
from .retries import status, stream_with_retries
from .runs import Run, Runs
from .state import Ask, RunState
from .streaming import Reply, SentSoFar, kept_across_activations
from .tooling import ToolRunner
from .tree import SessionTree

if TYPE_CHECKING:
    from .subagents import Subagents

KERNEL_SUMMARY_WAIT = 1.5
"""Seconds to wait for the kernel's variable summary before going on without it."""


@dataclass(frozen=True, slots=True)
class CallModel:
    """Ask the model for the next reply."""


@dataclass(frozen=True, slots=True)
class RunTools:
    """Execute the last reply's tool calls that have no result yet."""


@dataclass(frozen=True, slots=True)
class Suspend:
    """Stop and wait for the user (the run keeps its requestId)."""

    reason: SuspendReason


@dataclass(frozen=True, slots=True)
class Finish:
    """The run is complete."""

    reason: FinishReason
    message: str | None = None


Step = CallModel | RunTools | Suspend | Finish


def first_step(state: RunState) -> CallModel | RunTools:
    """Where an activation starts, from the persisted phase."""
    return RunTools() if state.phase == "tools" else CallModel()


class RunLoop:
    """Drives one run until it suspends or finishes; exceptions propagate to the runtime."""

    def __init__(
        self,
        run: Run,
        *,
        store: Store,
        config: RuntimeConfig,
        model: Model,
        runs: Runs,
        tools: list[Tool],
        kernel: KernelBridge | None,
        emitter: RunEmitter,
        system_prompt: str | None = None,
        subagents: Subagents | None = None,
    ) -> None:
        self.run = run
        self.state = run.state
        self._records = store.records
        self._tree = SessionTree(
            store.records, store.events, moves_leaf=run.parent_request_id is None
        )
        self._runs = runs
        self._config = config
        self._model = model
        self._tools = {t.name: t for t in tools}
        self._virtual = {v.name: v for v in run.options.virtual_tools}
        self._kernel = kernel
        self._emitter = emitter
        self._system_prompt = system_prompt or config.system_prompt
        self._kernel_summary: str | None = None
        self._subagents = subagents
        self._runner = ToolRunner(
            run,
            emitter,
            store.records,
            attachments_dir=config.attachments_dir,
            max_event_output=config.max_event_output,
        )

    async def drive(self, step: Step) -> Suspend | Finish:
        """Run steps until one ends the activation."""
        while True:
            match step:
                case CallModel():
                    step = await self._call_model()
                case RunTools():
                    step = await self._run_tools()
                case Suspend() | Finish():
                    return step
                case _:
                    assert_never(step)

    # --- model step

    async def _call_model(self) -> Step:
        max_steps = self.run.options.max_steps or self._config.max_steps
        if self.state.step >= max_steps:
            text = MAX_STEPS_TEXT.format(max_steps=max_steps)
            return await self._finish_with_notice(FinishReason.MAX_STEPS, text)
        await self._consume_inputs()
        await self._summarise_kernel()
        step = self.state.step + 1
        self._emitter.step = step
        with kept_across_activations(self.state, step) as sent:
            reply = await self._reply(f"call_{self.run.request_id[-6:]}_{step}", sent)
        entry = await self._add_entry("assistant", _assistant_message(reply))
        self.state.step, self.state.last_assistant = step, entry.entry_id
        self.state.phase = "tools" if reply.tool_calls else "model"
        await self._runs.save(self.run)
        return RunTools() if reply.tool_calls else Finish(FinishReason.STOP)

    async def _finish_with_notice(self, reason: FinishReason, text: str) -> Finish:
        """End the run with a text the system wrote, saved like an answer."""
        self._emitter.emit(EventType.TEXT_START, TextData(text=text, synthetic=True))
        self._emitter.emit(EventType.TEXT_END, TextData())
        entry = await self._add_entry("assistant", {"role": "assistant", "content": text})
        self.state.last_assistant = entry.entry_id
        return Finish(reason, text)

    async def _consume_inputs(self) -> None:
        for input_id, content in await self._records.pending_inputs(self.run.request_id):
            entry = await self._add_entry("user", {"role": "user", "content": content})
            await self._records.mark_input_consumed(input_id)
            self._emitter.emit(
                EventType.SUPPLEMENTARY_INPUT_CONSUMED,
                SupplementaryInputData(
                    input_id=input_id,
                    content=content,
                    user_message_id=entry.entry_id,
                    assistant_message_id=self.state.assistant_message_id,
                ),
            )

    async def _build_request(self) -> ModelRequest:
        path = await self._records.path(self.run.session_id, self.state.leaf)
        definitions = [t.definition for t in self._tools.values()]
        definitions += [v.definition for v in self._virtual.values()]
        conversation = context.messages(path)
        if reminder := self.state.remind:
            # Injected for this request only: a nudge, not part of the conversation.
            self.state.remind = None
            conversation.append(Message(role="user", content=reminder))
        session = await self._records.get_session(self.run.session_id)
        system = context.system_prompt(
            self._system_prompt,
            root=self._config.root_dir,
            notebook_path=self.run.options.notebook_path,
            session=session,
            skills=self._config.skill_catalogue(self._config.root_dir)
            if self._config.skill_catalogue and "run_skill" in self._tools
            else [],
            kernel_summary=self._kernel_summary,
        )
        thinking = self.run.options.thinking_level or (session and session.thinking_level)
        return ModelRequest(
            system=system,
            messages=conversation,
            tools=definitions,
            thinking=as_thinking_level(thinking),
        )

    async def _summarise_kernel(self) -> None:
        """Once per activation: what variables the user has, so the model can refer to them."""
        tool = self._tools.get("list_variables")
        if self._kernel_summary is not None or tool is None or self._kernel is None:
            return
        if (captured := self.run.options.kernel_variables) is not None:
            # What the prompt refers to: the variables when its cell ran (a later cell may be
            # running now, and the kernel answers only when it ends).
            self._kernel_summary = variables_as_of_prompt(captured)
            return
        ctx = ToolContext(
            root_dir=self._config.root_dir,
            session_id=self.run.session_id,
            request_id=self.run.request_id,
            tool_call_id="context",
            kernel=self._kernel,
        )
        try:
            # A kernel busy with the user's own cell answers only when that cell ends: do not
            # hold the run for a summary (the model can still call list_variables itself).
            async with asyncio.timeout(KERNEL_SUMMARY_WAIT):
                self._kernel_summary = (await tool.run("{}", ctx)).output
        except TimeoutError:
            self._kernel_summary = "(the kernel is busy running a cell; variables not listed yet)"
        except Exception as exc:  # a dead kernel must not stop the run
            self._kernel_summary = f"(could not list the kernel's variables: {exc})"

    async def _reply(self, call_id_prefix: str, sent: SentSoFar) -> Reply:
        """Budget gate, stream with retries, reactive compaction once, reconcile usage."""
        reactive_done = False
        while True:
            request, est = await self._gated_request()
            try:
                reply = await stream_with_retries(
                    self._model, request, self._emitter, self._config, call_id_prefix, sent
                )
            except ContextTooLong:
                if reactive_done:
                    raise
                reactive_done = True
                await self._compact("reactive", est.tokens)
                continue
            await reconcile(self._emitter, self._records, self.run, request, est, reply)
            return reply

    async def _gated_request(self) -> tuple[ModelRequest, Estimate]:
        """Build the request and pass it through the budget control plane."""
        budget = self._config.prompt_budget
        compacted = False
        while True:
            request = await self._build_request()
            est = estimate(self._model, request)
            action = publish_decision(self._emitter, self.run, request, est, budget, compacted)
            if action == "allow":
                return request, est
            if action == "stop":
                raise BudgetExceeded(
                    f"the conversation needs about {est.tokens} input tokens, over the budget of "
                    f"{budget} even after compaction; start a new session or raise the budget"
                )
            compacted = True
            await self._compact("in-loop", est.tokens)

    async def _compact(self, scope: CompactionScope, tokens_before: int) -> bool:
        return await compact(
            model=self._model,
            run=self.run,
            emitter=self._emitter,
            scope=scope,
            tokens_before=tokens_before,
            budget=self._config.prompt_budget,
            tree=self._tree,
        )

    # --- tool step

    async def _run_tools(self) -> Step:
        assert self.state.last_assistant is not None, "a tools phase follows a persisted reply"
        assistant = await self._records.get_entry(self.state.last_assistant)
        assert assistant is not None, "a tools phase always follows a persisted reply"
        answered = await self._answered_calls(assistant)
        calls = [ToolCall(**raw) for raw in assistant.message.get("tool_calls", [])]
        verdict = screen_step(self.state, self._config, calls)
        outcomes: list[bool] = []
        for call in calls:
            if call.id in answered:
                continue
            if (refusal := verdict.refused.get(call.id)) is not None:
                output, ok = self._runner.fail_without_running(call, refusal)
            else:
                outcome = await self._one_call(call)
                if isinstance(outcome, Suspend):
                    return outcome
                output, ok = outcome
                outcomes.append(ok)
            await self._answer(assistant, call, output, ok)
            await self._emitter.flush()
        reminded = await self._track_failures(outcomes)
        self.state.phase = "model"
        if verdict.stop:
            return await self._finish_with_notice(
                FinishReason.REPEATED_TOOL_CALLS, verdict.stop_text()
            )
        if verdict.remind and not reminded:
            # The failure reminder, when due, already says not to repeat the call.
            self.state.remind = verdict.reminder()
            await announce_repeats(self._emitter, verdict, self._config.max_repeated_calls)
        await self._runs.save(self.run)
        return CallModel()

    async def _track_failures(self, outcomes: list[bool]) -> bool:
        """Count steps whose calls all failed; past the threshold, remind the model (once)."""
        failed = self.state.failed_tool_steps + 1 if outcomes and not any(outcomes) else 0
        self.state.failed_tool_steps = failed
        limit = self._config.max_failed_tool_steps
        if failed < limit:
            return False
        self.state.failed_tool_steps = 0
        self.state.remind = TOOL_FAILURE_REMINDER
        await status(
            self._emitter,
            StatusCode.TOOL_CONSECUTIVE_FAILURES,
            f"Tool calls failed in {failed} steps in a row; reminding the model to change tack",
            failedSteps=failed,
            maxFailedSteps=limit,
        )
        return True

    async def _answered_calls(self, assistant: Entry) -> set[str]:
        path = await self._records.path(self.run.session_id, self.state.leaf)
        ids = [e.entry_id for e in path]
        after = path[ids.index(assistant.entry_id) + 1 :] if assistant.entry_id in ids else []
        return {e.message.get("tool_call_id", "") for e in after if e.role == "tool"}

    async def _one_call(self, call: ToolCall) -> tuple[str, bool] | Suspend:
        if call.name in self._virtual:
            return await self._runner.run_virtual(call, self._virtual[call.name])
        tool = self._tools.get(call.name)
        if tool is not None and call.name in RUNTIME_TOOL_NAMES:
            return await self._runtime_tool(call, tool)
        if tool is None:
            known = ", ".join(sorted([*self._tools, *self._virtual])) or "none"
            return self._runner.fail_without_running(
                call, f"unknown tool {call.name!r}; available tools: {known}"
            )
        decided = self.state.decisions.get(call.id)
        if decided is None:
            try:
                arguments = tool.parse_arguments(call.arguments)
            except ToolError as exc:
                return self._runner.fail_without_running(call, str(exc))
            verdict = await self._permission(call, tool, arguments)
            if verdict is not None:
                return verdict
        elif decided is False:
            return self._runner.fail_without_running(
                call, "the user denied permission to run this tool call"
            )
        ctx = ToolContext(
            root_dir=self._config.root_dir,
            session_id=self.run.session_id,
            request_id=self.run.request_id,
            tool_call_id=call.id,
            kernel=self._kernel,
            variables_at_prompt=self.run.options.kernel_variables,
            kernel_wait=self._config.kernel_wait,
            delegator=self._subagents.delegator(self.run, self._emitter, call.id)
            if self._subagents is not None
            else None,
        )
        return await self._runner.run_tool(call, tool, ctx)

    async def _runtime_tool(self, call: ToolCall, tool: Tool) -> tuple[str, bool] | Suspend:
        """The clarify and todo tools act on the run, so the runtime carries them out."""
        answer = self.state.answers.get(call.id)
        if call.name == "clarify" and answer is not None:
            return self._runner.complete(call, answer)
        try:
            arguments = tool.parse_arguments(call.arguments)
        except ToolError as exc:
            return self._runner.fail_without_running(call, str(exc))
        self._runner.start(call)
        if call.name == "todo":
            items = [
                {"id": e.id or str(i + 1), "content": e.content, "status": e.status}
                for i, e in enumerate(arguments["items"])
            ]
            await self._records.set_todo(self.run.session_id, items)
            self._emitter.emit(
                EventType.TODO_UPDATE, TodoData(items=[TodoItem(**i) for i in items])
            )
            done = sum(i["status"] == "completed" for i in items)
            return self._runner.complete(
                call, f"todo list updated: {len(items)} items, {done} done"
            )
        clarify_id = new_id("clr")
        self.state.ask = Ask(
            kind="clarify", ask_id=clarify_id, tool_call_id=call.id, tool_name=call.name
        )
        self._emitter.emit(
            EventType.CLARIFY_REQUEST,
            ClarifyData(
                clarify_id=clarify_id,
                question=arguments["question"],
                options=list(arguments.get("options") or []),
                tool_call_id=call.id,
            ),
        )
        return Suspend(
            SuspendReason(
                type=SuspendType.CLARIFY_REQUEST, ask_id=clarify_id, message=arguments["question"]
            )
        )

    async def _permission(
        self, call: ToolCall, tool: Tool, arguments: dict[str, Any]
    ) -> tuple[str, bool] | Suspend | None:
        """None when the call may run; otherwise the denial or the suspension."""
        session = await self._records.get_session(self.run.session_id)
        decision = decide(
            self._config.permission_rules,
            call.name,
            arguments,
            readonly=tool.readonly,
            always_allowed=frozenset(session.always_allow if session else []),
        )
        action = decision.action
        approve = self.run.options.approve
        if action == "ask" and approve in ("auto", "deny"):
            action = "allow" if approve == "auto" else "deny"
        if action == "allow":
            return None
        if action == "deny":
            return self._runner.fail_without_running(
                call, f"not allowed: {decision.rule_description} ({decision.rule_pattern})"
            )
        ask_id = new_id("ask")
        self.state.ask = Ask(
            kind="permission", ask_id=ask_id, tool_call_id=call.id, tool_name=call.name
        )
        self._emitter.emit(
            EventType.PERMISSION_ASK,
            PermissionAskData(
                ask_id=ask_id,
                principal_id=self.run.principal,
                tool_name=call.name,
                tool_call_id=call.id,
                arguments=call.arguments,
                rule_description=decision.rule_description,
                rule_pattern=decision.rule_pattern,
            ),
        )
        return Suspend(
            SuspendReason(
                type=SuspendType.PERMISSION_ASK,
                ask_id=ask_id,
                message=f"{call.name} needs your approval",
            )
        )

    # --- persistence

    async def _add_entry(self, role: Any, message: dict[str, Any]) -> Entry:
        entry_id = None
        if role == "assistant" and not self.state.assistant_used:
            entry_id = self.state.assistant_message_id
            self.state.assistant_used = True
        entry = await self._tree.add(
            self.run.session_id,
            role,
            message,
            request_id=self.run.request_id,
            parent_id=self.state.leaf,
            entry_id=entry_id,
            run=self._emitter,
        )
        self.state.leaf = entry.entry_id
        return entry

    async def _answer(self, assistant: Entry, call: ToolCall, output: str, ok: bool) -> None:
        """The call's result joins the tree; the assistant entry records how the call ended."""
        entry = await self._tree.answer(
            assistant,
            {"id": call.id, "name": call.name},
            output,
            "completed" if ok else "failed",
            request_id=self.run.request_id,
            parent_id=self.state.leaf,
            run=self._emitter,
        )
        self.state.leaf = entry.entry_id


def _assistant_message(reply: Reply) -> dict[str, Any]:
    return Message(
        role="assistant",
        content=reply.text,
        tool_calls=reply.tool_calls,
        reasoning=reply.reasoning or None,
    ).to_json()
