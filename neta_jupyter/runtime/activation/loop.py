"""One activation of a run: steps that carry their data, each returning the next (seed 004).

The steps are in :mod:`.steps`; this module carries out the model's side of them (building the
request, calling the model, compacting) and dispatches ``RunTools`` to :mod:`.calls`. Whenever
the loop moves to a step a later activation could start from, that step is kept in the run's
state (``state.next``), so resume, retry and restart continue from the last completed step
without running any tool twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, assert_never

from ...events import ErrorCode, EventType, FinishReason, SupplementaryInputData, SuspendReason
from ...providers.base import ContextTooLong, Message, Model, ModelRequest, as_thinking_level
from ...store import Store
from ...tools import Tool, ToolContext
from ...tools.introspection import variables_as_of_prompt
from ...tools.notebook_map import mapped
from ...tools.registry import KernelBridge, RunNotebook
from ..config import MAX_STEPS_TEXT, REPLY_TOO_LONG_TEXT, RuntimeConfig
from ..context import builder as context
from ..context.attachments import ENTRY_KEY, Shown, import_urls
from ..context.compaction import compact
from ..context.instructions import project_notes
from ..context.pictures import ToolPictures
from ..data.runs import Run, Runs
from ..data.steps import (
    BuildRequest,
    CallModel,
    Compact,
    Finish,
    ImportAttachments,
    RunTools,
    Step,
    Suspend,
)
from ..data.values import Reply
from ..log.emitter import RunEmitter
from ..log.tree import SessionTree
from .budget import BudgetExceeded, estimate, publish_decision, reconcile
from .calls import ToolStep
from .decisions import decide_stop, enter, evaluate
from .guards import recover, screen_step
from .ports import Delegation, Jobs
from .retries import stream_with_retries
from .streaming import kept_across_activations
from .tooling import ToolRunner
from .turn import Turn

KERNEL_SUMMARY_WAIT = 1.5
"""Seconds to wait for the kernel's variable summary before going on without it."""

COMPACTED = "compacted the conversation"
NOTHING_COMPACTED = "nothing was compacted"


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
        notebook: RunNotebook | None = None,
        system_prompt: str | None = None,
        subagents: Delegation | None = None,
        images: bool = False,
        jobs: Jobs | None = None,
    ) -> None:
        self.run = run
        self.state = run.state
        # A sub-agent writes a branch of its own and leaves the session's leaf alone.
        tree = SessionTree(store.records, store.events, moves_leaf=run.parent_request_id is None)
        self._turn = Turn(run, runs, tree, emitter, config)
        self._records = store.records
        self._config = config
        self._model = model
        self._tools = {t.name: t for t in tools}
        self._kernel = kernel
        self._notebook = notebook
        self._emitter = emitter
        self._system_prompt = system_prompt or config.system_prompt
        self._kernel_summary: str | None = None
        self._pause: Callable[[], SuspendReason | None] = lambda: None
        limits = config.image_limits
        self._shown = Shown(store.records, images=images, limits=limits)
        self._pictures = ToolPictures(
            store.records, vision=images, limits=limits, max_images=config.max_images
        )
        self._text_chars = 0  # of the current step's reply
        runner = ToolRunner(
            run,
            emitter,
            store.records,
            attachments_dir=config.attachments_dir,
            max_event_output=config.max_event_output,
            data_dir=config.data_dir,
        )
        self._calls = ToolStep(
            self._turn,
            tools=self._tools,
            kernel=kernel,
            runner=runner,
            subagents=subagents,
            notebook=notebook,
            jobs=jobs,
        )

    async def drive(
        self,
        step: Step,
        pause: Callable[[], SuspendReason | None] = lambda: None,
        *,
        deadline: float | None = None,
    ) -> Suspend | Finish:
        """Run steps until one ends the activation, or ``pause`` gives a reason to stop.

        A pause is taken only before a step the run's state keeps, so resuming goes on with it,
        or between two tool calls of a step. ``deadline``: when the activation's time runs out
        (the event loop's clock), the longest its tools' executions may run.
        """
        self._pause = pause
        self._calls.deadline = deadline
        while True:
            match step:
                case Suspend() | Finish():
                    return step
                case BuildRequest() | RunTools() | Compact() if (reason := pause()) is not None:
                    return Suspend(reason)
                case _:
                    step = await self.step(step)

    async def step(self, step: Step) -> Step:
        """Carry out one step; the next one (kept in the run's state if it can be stored)."""
        self._enter(step)
        match step:
            case BuildRequest():
                after: Step = await self._build_request(step)
            case CallModel():
                after = await self._call_model(step)
            case RunTools():
                after = await self._calls.run(step, self._pause)
            case Compact():
                after = await self._compact(step)
            case ImportAttachments():
                await import_urls(
                    step.refs,
                    run=self.run,
                    records=self._records,
                    tree=self._turn.tree,
                    emitter=self._emitter,
                    config=self._config,
                )
                after = BuildRequest()
            case Suspend() | Finish():
                return step
            case _:
                assert_never(step)
        self._evaluate(step, after)
        if isinstance(after, BuildRequest | RunTools | Compact) and after != self.state.next:
            self.state.next = after
            await self._turn.save()
        return after

    # --- decisions (seed 004): a few events per step, never per token

    def _enter(self, step: Step) -> None:
        """PHASE_CHANGED for the phase ``step`` starts."""
        match step:
            case BuildRequest():
                enter(self._emitter, "building_context")
            case CallModel():
                enter(self._emitter, "calling_model")
            case RunTools():
                enter(self._emitter, "running_tools", tool_names=[c.name for c in step.calls])
            case Compact():
                enter(self._emitter, "compacting")

    def _evaluate(self, step: Step, after: Step) -> None:
        """PROGRESS_EVALUATED once a model step has ended: its reply, and its calls if any."""
        if isinstance(step, CallModel) and isinstance(after, Finish):
            evaluate(self.state, self._emitter, self._text_chars, [])
        elif isinstance(step, RunTools) and not isinstance(after, Suspend):
            evaluate(self.state, self._emitter, self._text_chars, self._calls.results)
            self._text_chars = 0

    # --- BuildRequest

    async def _build_request(self, step: BuildRequest) -> CallModel | Compact | Finish:
        max_steps = self.run.options.max_steps or self._config.max_steps
        if self.state.step >= max_steps:
            text = MAX_STEPS_TEXT.format(max_steps=max_steps)
            return await self._turn.finish_with_notice(FinishReason.MAX_STEPS, text)
        if not (step.compacted or step.reactive_compacted):
            await self._consume_inputs()  # once per model step, not again after compacting it
        await self._summarise_kernel()
        if self._notebook is not None and self.state.notebook_map is None:
            self.state.notebook_map = await mapped(self._notebook)  # once: as the prompt saw it
        self._emitter.step = self.state.step + 1
        budget = self._config.prompt_budget
        request = await self._request()
        enter(self._emitter, "budgeting")
        est = estimate(self._model, request)
        action = publish_decision(self._emitter, self.run, request, est, budget, step.compacted)
        if action == "allow":
            return CallModel(request, est, reactive_compacted=step.reactive_compacted)
        if action == "stop":
            why = (
                f"the conversation needs about {est.tokens} input tokens, over the budget of "
                f"{budget} even after compaction; start a new session or raise the budget"
            )
            decide_stop(self._emitter, "budget_stop", why, error_code=ErrorCode.LLM_INVALID_REQUEST)
            raise BudgetExceeded(why)
        then = BuildRequest(compacted=True, reactive_compacted=step.reactive_compacted)
        return Compact(scope="in-loop", tokens_before=est.tokens, then=then)

    async def _consume_inputs(self) -> None:
        for input_id, content in await self._records.pending_inputs(self.run.request_id):
            entry = await self._turn.add_entry("user", {"role": "user", "content": content})
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

    async def _request(self) -> ModelRequest:
        path = await self._records.path(self.run.session_id, self.state.leaf)
        definitions = [t.definition for t in self._tools.values()]
        definitions += [v.definition for v in self.run.options.virtual_tools]
        attached = {
            e.entry_id: await self._shown.of(items)
            for e in path
            if e.role == "user" and (items := e.message.get(ENTRY_KEY))
        }
        conversation = context.messages(path, attached, await self._pictures.shown(path))
        if reminder := self.state.remind:
            # Injected for this request only: a nudge, not part of the conversation.
            self.state.remind = None
            conversation.append(Message(role="user", content=reminder))
        session = await self._records.get_session(self.run.session_id)
        root = self._config.root_dir
        system = context.system_prompt(
            self._system_prompt,
            notes=await project_notes(root, self.run.options.notebook_path),
            session=session,
            skills=self._config.skill_catalogue(root)
            if self._config.skill_catalogue and "run_skill" in self._tools
            else [],
            kernel_summary=self._kernel_summary,
            notebook_map=self.state.notebook_map if self._notebook is not None else None,
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

    # --- CallModel

    async def _call_model(self, step: CallModel) -> RunTools | Compact | BuildRequest | Finish:
        number = self.state.step + 1
        self._emitter.step = number
        prefix = f"call_{self.run.request_id[-6:]}_{number}"
        try:
            with kept_across_activations(self.state, number) as sent:
                reply = await stream_with_retries(
                    self._model, step.request, self._emitter, self._config, prefix, sent
                )
        except ContextTooLong:
            if step.reactive_compacted:
                raise
            then = BuildRequest(reactive_compacted=True)
            return Compact(scope="reactive", tokens_before=step.estimate.tokens, then=then)
        await reconcile(self._emitter, self._records, self.run, step.request, step.estimate, reply)
        if reply.cut is not None:
            reply.tool_calls = []  # their arguments were cut off: nothing to run
        entry = await self._turn.add_entry("assistant", _assistant_message(reply))
        self.state.step, self.state.last_assistant = number, entry.entry_id
        self._text_chars = len(reply.text)
        if reply.cut is not None:
            text = REPLY_TOO_LONG_TEXT.format(limit=reply.cut)
            return await self._turn.finish_with_notice(FinishReason.REPLY_TOO_LONG, text)
        if not reply.tool_calls:
            retry = await recover(self.state, self._config, self._emitter)
            return BuildRequest() if retry else Finish(FinishReason.STOP)
        verdict = screen_step(self.state, self._config, reply.tool_calls)
        return RunTools(reply_id=entry.entry_id, calls=reply.tool_calls, verdict=verdict)

    # --- Compact

    async def _compact(self, step: Compact) -> BuildRequest | Finish:
        tokens = step.tokens_before
        if tokens is None:
            path = await self._records.path(self.run.session_id, self.state.leaf)
            tokens = sum(len(str(e.message.get("content", ""))) for e in path) // 4
        done = await compact(
            model=self._model,
            tree=self._turn.tree,
            run=self.run,
            emitter=self._emitter,
            scope=step.scope,
            tokens_before=tokens,
            budget=self._config.prompt_budget,
            instructions=step.instructions,
        )
        if step.then is not None:
            return step.then
        return Finish(FinishReason.STOP, COMPACTED if done else NOTHING_COMPACTED)


def _assistant_message(reply: Reply) -> dict[str, Any]:
    return Message(
        role="assistant",
        content=reply.text,
        tool_calls=reply.tool_calls,
        reasoning=reply.reasoning or None,
    ).to_json()
