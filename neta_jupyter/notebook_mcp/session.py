"""One MCP session as one run of the durable log: born like any run, each call a TOOL_* sequence.

The run's kind is ``mcp`` and its options name the client (from its ``initialize``); its prompt
names it too, so the cells its calls write carry provenance naming the client. A call goes
through neta's permission rules first (:mod:`.asks`); it then runs as the registry's tool with a
context bound to the notebook it names, so its edits are addressed by id, refused when stale,
published with a diff and revertible like a neta run's. The run ends (``MESSAGE_COMPLETED``) when
the session does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..events import ErrorCode, FinishReason
from ..providers.base import ToolCall
from ..runtime.activation.endings import end_run, fail_run
from ..runtime.activation.scope import CallScope
from ..runtime.activation.tooling import ToolRunner
from ..runtime.birth import FirstEntry, begin_run, top_level_run
from ..runtime.data.state import McpClient, RunOptions, RunState
from ..runtime.data.steps import Finish
from ..runtime.errors import RunApiError, RunConflict, RunNotFound
from ..runtime.session_ops import own_session
from ..store import new_id
from ..tools import RunSuspended, Tool, ToolContext, ToolError, ToolResult
from ..tools.notebook_doc import NotebookHost
from ..tools.registry import KernelBridge, RunNotebook
from .asks import Asks, Progress
from .catalogue import KERNEL_NOTEBOOK_TOOLS, NOT_OFFERED_ARGUMENTS, NOTEBOOK_ARGUMENT, reach_of
from .extended import with_notebook

if TYPE_CHECKING:
    from ..runtime.data.runs import Run
    from ..runtime.log.emitter import RunEmitter
    from ..runtime.manager import Runtime


@dataclass(frozen=True, slots=True)
class Binding:
    """A notebook a session works on, and its kernel."""

    path: str
    """Under the server root."""
    notebook: NotebookHost
    kernel: KernelBridge | None
    kernel_id: str | None
    note: str = ""
    """What binding it did that the client should know (a kernel started for it)."""


class Workspace(Protocol):
    """The server's notebooks and kernels, as one user reaches them (supplied by ``server/``)."""

    async def notebooks(self, principal: str) -> list[dict[str, Any]]:
        """The notebooks open on the server whose kernels the user may use."""
        ...

    async def bind(self, principal: str, path: str, *, kernel: bool) -> Binding:
        """The notebook at ``path``; with ``kernel``, its session's kernel, started if none.

        A :class:`ToolError` for a path outside the root, or a kernel another user started.
        """
        ...


CANCELLED = "cancelled by the MCP client"


def session_prompt(client: McpClient) -> str:
    """The run's prompt, and so the provenance of the cells its calls write."""
    version = f" {client.version}" if client.version else ""
    return f"MCP client {client.name}{version}"


class McpSession:
    """The run of one MCP session, and the calls it makes."""

    def __init__(
        self, runtime: Runtime, workspace: Workspace, run: Run, emitter: RunEmitter, wait: float
    ) -> None:
        self._runtime = runtime
        self._workspace = workspace
        self.run = run
        self._emitter = emitter
        self._bindings: dict[str, Binding] = {}
        self._seen: dict[str, dict[str, str]] = {}
        """By notebook, the hash of the version of each cell the client last saw."""
        self._told: set[str] = set()
        """Notebooks whose binding's note a result has given."""
        self._calls: set[asyncio.Task[Any]] = set()
        """The calls under way."""
        self._ending = ""
        config = runtime.config
        self._runner = ToolRunner(
            run,
            emitter,
            runtime.store.records,
            attachments_dir=config.attachments_dir,
            max_event_output=config.max_event_output,
            data_dir=config.data_dir,
        )
        client = run.options.mcp_client
        self.asks = Asks(runtime, run, emitter, client.name if client else "", wait)
        self.ended = False

    @classmethod
    async def born(
        cls,
        runtime: Runtime,
        workspace: Workspace,
        principal: str,
        client: McpClient,
        *,
        ask_timeout: float,
    ) -> McpSession:
        """A new session's run, in a session of its own, born like any run."""
        try:
            # A session is a run going: it counts towards the user's quota of them.
            async with runtime.quota.starting(principal, await runtime.running_count(principal)):
                run, emitter = await _birth(runtime, principal, client)
        except RunApiError as exc:
            raise ToolError(exc.message) from exc
        await emitter.flush()
        mcp = cls(runtime, workspace, run, emitter, ask_timeout)
        runtime.live[run.request_id] = mcp
        return mcp

    async def call(self, name: str, arguments: dict[str, Any], progress: Progress) -> ToolResult:
        """Run one tool call of the client; a :class:`ToolError` says why it failed."""
        if self.ended:
            raise ToolError(f"this session's run has ended ({self._ending}); start a new session")
        # Its own task, so that stopping the run cancels the call and not the client's session.
        task = asyncio.ensure_future(self._call(name, arguments, progress))
        self._calls.add(task)
        try:
            return await task
        except asyncio.CancelledError:
            caller = asyncio.current_task()
            if caller is not None and caller.cancelling():
                raise  # the client cancelled the call
            raise ToolError(f"the call was cancelled: {self._ending}") from None
        finally:
            self._calls.discard(task)

    async def _call(self, name: str, arguments: dict[str, Any], progress: Progress) -> ToolResult:
        tool, binding = await self._resolve(name, arguments)
        call = ToolCall(new_id("call"), name, json.dumps(arguments, ensure_ascii=False))
        ctx = self._context(call, binding)
        try:
            parsed = tool.parse_arguments(call.arguments)
        except ToolError as exc:
            self._runner.fail_without_running(call, str(exc))
            raise
        refused, approved = await self.asks.permission(call, tool, parsed, ctx, progress)
        if refused is not None:
            self._runner.fail_without_running(call, refused)
            raise ToolError(refused)
        if approved is not None:
            ctx.approved = approved
        progress.message = f"{name} is running"
        result = await self._execute(call, tool, ctx)
        if binding is not None and binding.note and binding.path not in self._told:
            self._told.add(binding.path)
            result.output = f"({binding.note})\n{result.output}"
        return result

    async def _execute(self, call: ToolCall, tool: Tool, ctx: ToolContext) -> ToolResult:
        result: ToolResult | None = None

        async def keep(inner: ToolContext, **kwargs: Any) -> ToolResult:
            nonlocal result
            produced = await tool.function(inner, **kwargs)
            result = ToolResult(produced) if isinstance(produced, str) else produced
            return result

        try:
            kept = dataclasses.replace(tool, function=keep)
            output, ok = await self._runner.run_tool(call, kept, ctx)
        except RunSuspended as exc:  # tools that suspend a run are not offered; never hang here
            self._runner.fail_without_running(call, str(exc))
            raise ToolError(f"{call.name} cannot wait for a person over MCP") from exc
        except asyncio.CancelledError:
            # The client cancelled the call (the kernel was interrupted): its card ends too.
            self._runner.fail_without_running(call, CANCELLED)
            raise
        finally:
            self._runner.take_meta(call.id)
            await self._emitter.flush()
        if not ok or result is None:
            raise ToolError(output.removeprefix("Error: "))
        return result

    async def _resolve(self, name: str, arguments: dict[str, Any]) -> tuple[Tool, Binding | None]:
        """The tool as offered (with its ``notebook`` argument) and the notebook it works on."""
        reach = reach_of(name)
        tool = self._runtime.tools.get(name) if reach is not None else None
        if tool is None or reach is None:
            raise ToolError(f"unknown tool {name!r}")
        if hidden := sorted(NOT_OFFERED_ARGUMENTS & arguments.keys()):
            raise ToolError(f"{name} takes no {', '.join(hidden)} over MCP: its call waits")
        if reach == "root":
            return tool, None
        path = arguments.get(NOTEBOOK_ARGUMENT)
        if not isinstance(path, str) or not path.strip():
            raise ToolError(f"{name} needs `notebook`: the notebook's path under the server root")
        also = tool.also_does(arguments) if tool.also_does is not None else None
        kernel = reach == "kernel" or bool({tool.name, also} & KERNEL_NOTEBOOK_TOOLS)
        return with_notebook(tool), await self.bind(path, kernel=kernel)

    async def bind(self, path: str, *, kernel: bool) -> Binding:
        """The notebook at ``path``, bound on first use (its kernel when first needed)."""
        found = self._bindings.get(path)
        if found is None or (kernel and found.kernel_id is None):
            principal = self.run.principal
            found = await self._workspace.bind(principal, path, kernel=kernel)
            self._bindings[path] = found
        return found

    def _context(self, call: ToolCall, binding: Binding | None) -> ToolContext:
        config, run = self._runtime.config, self.run
        notebook = None
        if binding is not None:
            # One per notebook for the session: the versions of its cells the client last saw.
            seen = self._seen.setdefault(binding.path, {})
            notebook = RunNotebook(binding.notebook, run.prompt, seen)
        records = self._runtime.store.records
        return ToolContext(
            root_dir=config.root_dir,
            session_id=run.session_id,
            request_id=run.request_id,
            tool_call_id=call.id,
            kernel=binding.kernel if binding is not None else None,
            kernel_wait=config.kernel_wait,
            execution_timeout=config.execution_timeout,
            notebook=notebook,
            scope=CallScope(run, call, emitter=self._emitter, records=records),
        )

    async def answer(
        self,
        principal: str,
        *,
        approved: bool | None,
        ask_id: str | None,
        always: bool,
        answer: str | None,
        digest: str | None,
    ) -> Run:
        """The run API's decision on one of the session's asks."""
        return await self.asks.answer(
            principal, approved=approved, ask_id=ask_id, always=always, answer=answer, digest=digest
        )

    async def stop(self, principal: str) -> Run:
        """The user stops the session's run: its calls are cancelled, it ends USER_CANCELLED."""
        if principal != self.run.principal:
            raise RunNotFound(f"no run with requestId {self.run.request_id!r}")
        if self.ended:
            raise RunConflict(f"run {self.run.request_id} has ended", code="RUN_NOT_ACTIVE")
        self._close("stopped by the user")
        calls = list(self._calls)
        for task in calls:
            task.cancel()
        await asyncio.gather(*calls, return_exceptions=True)
        await fail_run(
            self._runtime.runs,
            self.run,
            self._emitter,
            ErrorCode.USER_CANCELLED,
            "the user stopped the MCP session's run",
            recoverable=False,
        )
        await self._emitter.flush()
        return self.run

    def _close(self, why: str) -> None:
        self.ended, self._ending = True, why
        self._runtime.live.pop(self.run.request_id, None)
        self.asks.close()

    async def end(self, message: str = "the MCP session ended") -> None:
        """``MESSAGE_COMPLETED``: the session is over (the client closed it, or the server)."""
        if self.ended:
            return
        self._close(message)
        await end_run(
            self._runtime.runs, self.run, self._emitter, Finish(FinishReason.STOP, message)
        )
        await self._emitter.flush()


async def _birth(runtime: Runtime, principal: str, client: McpClient) -> tuple[Run, RunEmitter]:
    prompt = session_prompt(client)
    records = runtime.store.records
    session = await own_session(records, principal, None, f"{prompt} · {new_id('mcp')}")
    options = RunOptions(kind="mcp", mcp_client=client, approve="ask")
    state = RunState(assistant_message_id=new_id("e"))
    model = f"mcp:{client.name}"
    run = top_level_run(principal, session.session_id, model, prompt, options, state)
    emitter = await begin_run(runtime, run, FirstEntry(session.leaf_entry_id), hold=True)
    return run, emitter
