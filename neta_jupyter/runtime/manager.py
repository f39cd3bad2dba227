"""The runtime's public API: start, resume, retry, terminate, add input — transport-agnostic.

Each activation of a run is an asyncio task driving a :class:`RunLoop` from the step kept in the
run's state (:mod:`.activations`); whatever ends it ends the stream with exactly one terminal
event.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ..events import ErrorCode
from ..events.runs import StartedFrom
from ..providers import ModelRegistry, UnknownModel
from ..store import SessionRecord, Store, new_id
from ..tools import ToolRegistry
from . import session_ops
from .activation.endings import recover_crashed
from .activation.loop import RunLoop
from .activation.resumes import decide_ask
from .assembly import assemble_loop, prepare_tools
from .birth import FirstEntry, begin_run, top_level_run
from .config import RuntimeConfig
from .context.attachments import ENTRY_KEY, announce, requested
from .data.runs import Run, Runs, events_expired
from .data.state import RunState, new_options
from .data.steps import first_step
from .errors import BadRunRequest, RunConflict
from .host import CancelReason, KernelFactory, LiveRun, NotebookFactory
from .imports import ImportedCalls, import_run
from .log.emitter import RunEmitter
from .log.tree import SessionTree
from .lookup import RunQueries
from .scheduling.activations import Activations
from .scheduling.admission import StartGate
from .scheduling.background import BackgroundJobs
from .scheduling.quotas import RunQuota
from .scheduling.takeover import Takeover
from .scheduling.waiting import Waiting
from .session_ops import compact_run, own_session
from .targets import RunTargets
from .trees.subagents import Subagents


class Runtime(RunQueries):
    """Owns the active runs of one process."""

    def __init__(
        self,
        store: Store,
        config: RuntimeConfig,
        *,
        models: ModelRegistry | None = None,
        tools: ToolRegistry | None = None,
        kernels: KernelFactory | None = None,
        notebooks: NotebookFactory | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        from ..tools import builtin_tools

        self.store = store
        self.runs = Runs(store.records)
        """The runs of the store, typed."""
        self.config = config
        self.quota = RunQuota(config.max_active_runs_per_user)
        """Runs of one user going at once."""
        self.models = models or ModelRegistry(demo_pace=config.demo_pace)
        self.tools = tools or ToolRegistry(builtin_tools())
        self.kernels = kernels
        self.notebooks = notebooks
        """The run's notebook for the notebook tools (``None``: no server, no notebook tools)."""
        self.targets: RunTargets | None = None
        """Checks the notebook and kernel of a run request (``None``: the host has none)."""
        self.tree = SessionTree(store.records, store.events)
        """Every write to a session tree goes through it, so each is published."""
        self.log = logger or logging.getLogger("neta_jupyter")
        self._admit_start = StartGate()
        self._active = Activations(
            store,
            self.runs,
            config,
            self._loop,
            self.log,
            lambda run: self.waiting.watch(run),
            prepare=lambda run, emitter: prepare_tools(self, run, emitter),
        )
        self.waiting: Waiting = Waiting(self, self._active)
        """Pauses, and the deadlines of runs that wait for a person."""
        self.subagents = Subagents(self)
        """The child runs of runs that delegate, and the trees they make."""
        self.takeover = Takeover(self)
        """Runs other servers may hold: lost ones, a dead server's ones, stopping them."""
        self.background = BackgroundJobs(self)
        """Work runs wait for in the background (ASYNC_TOOL_PENDING)."""
        self.live: dict[str, LiveRun] = {}
        """Runs a live client drives (MCP sessions), by requestId."""
        self.register_secrets()

    def register_secrets(self) -> None:
        """Have the store redact every secret the configuration names, by value.

        The one place configuration hands over its secrets: each endpoint's key today (whatever
        its variable is called); store credentials and tool environments belong here as well.
        """
        self.store.redactor.add(*self.models.secrets(), *self.store.secrets)

    # --- actions

    async def start(
        self,
        principal: str,
        content: str,
        *,
        session_id: str | None = None,
        session_name: str | None = None,
        model: str | None = None,
        virtual_tools: list[dict[str, Any]] | None = None,
        tools: list[str] | None = None,
        max_steps: int | None = None,
        approve: str = "ask",
        kernel_id: str | None = None,
        notebook_path: str | None = None,
        thinking_level: str | None = None,
        kernel_variables: list[str] | None = None,
        suspend_timeout: float | None = None,
        attachments: list[dict[str, Any]] | None = None,
        origin: StartedFrom | None = None,
    ) -> Run:
        """Create a run, persist the user message and start the loop.

        ``kernel_variables``: the kernel's variables when the prompt was written, one summary line
        each; the model's context, and ``list_variables`` while a cell keeps the kernel busy.
        ``attachments``: uploads by ``attachmentId`` and ``url`` s to import (:mod:`.attachments`).
        """
        await self._admit_start()
        if not content.strip():
            raise BadRunRequest("content must not be empty", code="EMPTY_CONTENT")
        model_name = self._known_model(model)
        options = new_options(
            virtual_tools=virtual_tools,
            tools=tools,
            max_steps=max_steps,
            approve=approve,
            kernel_id=kernel_id,
            notebook_path=notebook_path,
            thinking_level=thinking_level,
            kernel_variables=kernel_variables,
            suspend_timeout=suspend_timeout,
            attachments=attachments,
            origin=origin,
        )
        async with self.quota.starting(principal, await self.running_count(principal)):
            attached, imports = await requested(self.store.records, principal, attachments)
            session = await own_session(self.store.records, principal, session_id, session_name)
            session = await self._supersede_suspended(session)
            state = RunState(assistant_message_id=new_id("e"), next=first_step(imports))
            run = top_level_run(principal, session.session_id, model_name, content, options, state)
            first = FirstEntry(
                session.leaf_entry_id, extra={ENTRY_KEY: attached} if attached else {}
            )
            emitter = await begin_run(self, run, first, hold=True)
        announce(emitter, attached, run.session_id)
        self._active.launch(run, run.state.next)
        return run

    async def resume(
        self,
        principal: str,
        request_id: str,
        *,
        approved: bool | None = None,
        ask_id: str | None = None,
        always: bool = False,
        answer: str | None = None,
        digest: str | None = None,
    ) -> Run:
        """Continue a suspended run, with the decision on its pending ask if it has one.

        ``digest``: of what the decider was shown (a permission ask's ``digest``).
        """
        if (live := self.live.get(request_id)) is not None:
            return await live.answer(
                principal,
                approved=approved,
                ask_id=ask_id,
                always=always,
                answer=answer,
                digest=digest,
            )
        with self.waiting.claim(request_id):  # not reclaimed meanwhile
            run = await self.get_run(principal, request_id)
            refused = f"run {request_id} is {run.status}, not suspended"
            if run.status != "suspended" or self.is_active(request_id):
                raise RunConflict(refused, code="RUN_NOT_SUSPENDED")
            await self.takeover.take(request_id, "RUN_NOT_SUSPENDED", refused)
            async with self.takeover.releasing(request_id):
                run = await self.get_run(principal, request_id)  # as it is now the run is ours
                if run.status != "suspended":
                    raise RunConflict(refused, code="RUN_NOT_SUSPENDED")
                await self._active.refuse_invalid(run, self.tools.known())
                await decide_ask(
                    run,
                    ask_id=ask_id,
                    approved=approved,
                    always=always,
                    answer=answer,
                    records=self.store.records,
                    emitter=lambda: self._emitter(run),
                    digest=digest,
                )
                run.status, run.state.suspend_deadline = "running", None
                await self.runs.save(run)
                self._active.launch(run, run.state.next)
        self.waiting.forget(request_id)
        return run

    async def suspend(self, principal: str, request_id: str) -> Run:
        """Pause a running run at its next step boundary (MANUAL_SUSPEND); resume continues it."""
        return await self.waiting.pause(principal, request_id)

    async def retry(self, principal: str, request_id: str) -> Run:
        """Continue a run that failed recoverably, from its last completed step."""
        run = await self.get_run(principal, request_id)
        await self._active.refuse_invalid(run, self.tools.known(), retrying=True)
        refused = f"run {request_id} is {run.status} and cannot be retried"
        if run.options.kind == "mcp":  # its client is gone: it starts a new session instead
            refused = f"run {request_id} was an MCP client's session and cannot be retried"
        if run.status != "failed" or not run.state.recoverable or run.options.kind == "mcp":
            raise RunConflict(refused, code="RUN_NOT_RETRYABLE")
        if await events_expired(self.store.events, run):  # its stream would start again with a gap
            raise RunConflict(
                f"run {request_id} cannot be retried: its events were deleted once kept long "
                "enough after it failed; start a new run in its session instead",
                code="RUN_NOT_RETRYABLE",
            )
        await self.takeover.take(request_id, "RUN_NOT_RETRYABLE", refused)
        async with self.takeover.releasing(request_id):
            run = await self.get_run(principal, request_id)  # as it is now the run is ours
            if run.status != "failed" or not run.state.recoverable:
                raise RunConflict(refused, code="RUN_NOT_RETRYABLE")
            run.status = "running"
            run.state.recoverable = False
            await self.runs.save(run)
            self._active.launch(run, run.state.next)
        return run

    async def terminate(self, principal: str, request_id: str) -> Run:
        """Cancel a running or suspended run (USER_CANCELLED), and the children it started."""
        if (live := self.live.get(request_id)) is not None:
            return await live.stop(principal)
        run = await self.get_run(principal, request_id)
        await self.background.cancel(request_id)  # the kernel is interrupted
        if await self._active.cancel(request_id, "user"):
            return await self.get_run(principal, request_id)
        if await self.takeover.stop_elsewhere(run):
            return await self.get_run(principal, request_id)
        # Running without an activation here: a sub-agent waiting for a slot of its batch.
        if run.status not in ("suspended", "running"):
            raise RunConflict(
                f"run {request_id} is {run.status}; nothing to terminate", code="RUN_NOT_ACTIVE"
            )
        await self.subagents.stop(request_id, "user")
        return await self.get_run(principal, request_id)

    async def cancel(self, request_id: str, reason: CancelReason) -> None:
        """Cancel the run's activation and wait for its end (:data:`CancelReason`)."""
        await self._active.cancel(request_id, reason)

    def cancel_reason(self, request_id: str) -> CancelReason:
        """Why the run's activation is being cancelled (no reason given: its time ran out)."""
        return self._active.cancel_reason(request_id)

    async def continue_run(self, run: Run) -> None:
        """Start a stored run's loop from where it stands (a sub-agent, when its batch may)."""
        if not await self.store.acquire(run.request_id):
            return  # another server runs it
        run.status = "running"
        await self.runs.save(run)
        self._active.launch(run, run.state.next)

    @property
    def stopping(self) -> bool:
        """The runtime is shutting down: no activation starts."""
        return self._active.stopping

    async def add_input(self, principal: str, request_id: str, content: str) -> str:
        """Queue input for the run's next step boundary."""
        run = await self.get_run(principal, request_id)
        if run.status not in ("running", "suspended"):
            raise RunConflict(
                f"run {request_id} is {run.status}; input can only be added while it runs",
                code="RUN_NOT_ACTIVE",
            )
        if not content.strip():
            raise BadRunRequest("content must not be empty", code="EMPTY_CONTENT")
        return await self.store.records.add_input(request_id, content)

    async def compact_session(
        self,
        principal: str,
        session_id: str,
        *,
        instructions: str | None = None,
        model: str | None = None,
    ) -> Run:
        """Summarise a session's older turns now: a run of one ``Compact`` step."""
        session = await own_session(self.store.records, principal, session_id, None)
        session = await self._supersede_suspended(session)
        run = compact_run(principal, session, model or self.config.default_model, instructions)
        await begin_run(self, run, None, hold=True)
        self._active.launch(run, run.state.next)
        return run

    async def switch_leaf(self, principal: str, session_id: str, entry_id: str | None) -> None:
        """Continue the session's conversation from another entry of its tree."""
        await session_ops.switch_leaf(
            self.store.records, self.tree, principal, session_id, entry_id
        )

    async def set_thinking_level(self, principal: str, session_id: str, level: str | None) -> None:
        """How hard the model thinks in the session's next runs (``None``: the default)."""
        await session_ops.set_thinking_level(self.store.records, principal, session_id, level)

    async def import_run(
        self, principal: str, name: str, prompt: str, answer: str, calls: ImportedCalls = ()
    ) -> Run:
        """Register a history run (its prompt, answer and tool calls) that has no event stream."""
        return await import_run(self.runs, self.tree, principal, name, prompt, answer, calls)

    # --- lifecycle

    async def recover(self) -> int:
        """At start-up: runs left running by a crashed process end with SYSTEM_CRASH.

        Recoverable: Retry continues from the persisted position; calls that were executing
        are answered as interrupted, never run again. On a shared store, only the runs no live
        server executes.

        Except in run trees: a parent that waited for its children, and children that had not
        got going, are suspended (resumable), so the tree goes on when resumed.
        """
        take = self.takeover.may_recover  # not the runs another live server executes
        suspended = await self.subagents.recover(take)
        crashed = await recover_crashed(self.runs, self._emitter, take)
        self.takeover.recovered()
        await self.waiting.recover()  # runs left waiting past their deadline: USER_NO_RESPONSE
        await self.background.recover()  # runs that waited for work of the last process
        return suspended + crashed

    async def shutdown(self) -> None:
        """Suspend every executing run with SHUTDOWN_INTERRUPT (resumable after restart)."""
        self.takeover.stop()
        await self.waiting.close()
        await self.background.close()
        await self._active.shutdown()
        self.store.commit()
        # Tool sources (MCP servers) stop with the runtime, once no run can call them.
        await asyncio.gather(*(source.aclose() for source in self.tools.sources))

    # --- internals

    def _known_model(self, model: str | None) -> str:
        """The model a run asks for (or the default), refused when no endpoint serves it."""
        name = model or self.config.default_model
        self.register_secrets()  # a key set since start-up is known before the run can echo it
        try:
            self.models.resolve(name)
        except UnknownModel as exc:
            raise BadRunRequest(str(exc), code="UNKNOWN_MODEL") from exc
        return name

    async def _supersede_suspended(self, session: SessionRecord) -> SessionRecord:
        """End the session's suspended runs; the session as it is after (its leaf may move)."""
        records = self.store.records
        for found in await self.runs.find(session_id=session.session_id, limit=20):
            # Stopping a tree ends runs further on.
            run = await self.runs.get(found.request_id) or found
            busy = self.is_active(run.request_id) or self.background.waits(run.request_id)
            if run.status == "running" or busy:
                raise RunConflict(
                    f"run {run.request_id} is still running in this session (or waits for code "
                    "it runs in the background); stop it or use another session",
                    code="SESSION_BUSY",
                )
            if run.status == "suspended":
                await self._active.fail(
                    run,
                    await self._emitter(run),
                    ErrorCode.USER_CANCELLED,
                    "superseded by a new prompt in the same session",
                    recoverable=False,
                    wait=False,
                )
                await self.subagents.stop_children(run, "user")
        return await records.get_session(session.session_id) or session

    async def emitter(self, run: Run) -> RunEmitter:
        """Publishes the run's events, carrying on from its step and token total."""
        return await self._emitter(run)

    async def _emitter(self, run: Run) -> RunEmitter:
        """The run's emitter, once its stream can be appended to."""
        return await self._active.emitter(run)

    async def loop(self, run: Run) -> RunLoop:
        """A loop over ``run`` outside any activation, to carry out its steps one at a time."""
        return self._loop(run, await self._emitter(run))

    def _loop(self, run: Run, emitter: RunEmitter) -> RunLoop:
        return assemble_loop(self, run, emitter)
