"""Tools: plain async functions whose JSON Schema is derived from their type hints.

A tool names its *host*: ``server`` tools run in the process that runs the agent, ``kernel``
tools run in the notebook's kernel through the :class:`KernelBridge` the host supplies, and
``notebook`` tools change the run's notebook through the :class:`RunNotebook` the server supplies
(they are offered only to a run that has one).

Exceptions (who raises → who catches)::

    ToolError      raised by tools and argument validation, caught by the runtime → TOOL_FAILED
    RunSuspended   raised by a tool's RunScope (:mod:`.scope`), caught by the runtime → suspended
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Awaitable, Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, get_type_hints

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from ..providers.base import ToolDefinition
from .scope import RunScope
from .values import ToolError, ToolResult

if TYPE_CHECKING:
    from .notebook_doc import NotebookHost

ToolHost = Literal["server", "kernel", "notebook"]


ProcessStatus = Literal[
    "queued", "started", "running", "completed", "failed", "cancelled", "skipped"
]
ProcessLevel = Literal["debug", "info", "warning", "error"]
ProcessSource = Literal["skill", "tool", "subagent", "runtime"]
ProcessTarget = Literal["tool", "skill", "subagent", "task", "runtime"]
SkillEvent = Literal["activated", "deactivated", "missing"]


class ProcessSink(Protocol):
    """Where a long tool reports its progress (PROCESS_EVENT; supplied by the runtime)."""

    @property
    def operation_id(self) -> str:
        """The operation of this tool call (the default of :meth:`report`)."""
        ...

    def report(
        self,
        *,
        status: ProcessStatus = "running",
        stage: str | None = None,
        message: str | None = None,
        current: float | None = None,
        total: float | None = None,
        percent: float | None = None,
        level: ProcessLevel = "info",
        payload: dict[str, Any] | None = None,
        operation_id: str | None = None,
        parent_operation_id: str | None = None,
        target_type: ProcessTarget = "tool",
        source: ProcessSource = "tool",
    ) -> None:
        """Report progress; frequent reports are coalesced, secrets in ``payload`` redacted."""
        ...

    def skill(
        self,
        event: SkillEvent,
        name: str,
        *,
        description: str | None = None,
        message: str | None = None,
    ) -> None:
        """Announce a skill's activation, deactivation or absence (SKILL_*)."""
        ...


class _NoProcess:
    """The sink of a context built outside a runtime: progress goes nowhere."""

    operation_id = "op"

    def report(self, **_fields: Any) -> None:
        """Drop the report."""

    def skill(self, event: SkillEvent, name: str, **_fields: Any) -> None:
        """Drop the announcement."""


DEFAULT_KERNEL_WAIT = 600.0
"""Seconds ``list_variables`` and ``inspect_variable`` wait while the user's cell runs."""


class KernelBridge(Protocol):
    """Runs code in the notebook's kernel (supplied by the host: ``kernel/``, ``server/``)."""

    async def execute(
        self,
        code: str,
        *,
        timeout: float | None = None,
        on_output: Callable[[str], None] | None = None,
    ) -> ToolResult:
        """Execute ``code`` and collect its outputs (``on_output``: stdout/stderr as it comes)."""
        ...


@dataclass(frozen=True, slots=True)
class RunNotebook:
    """The notebook a run was started from, as its notebook tools reach it."""

    host: NotebookHost
    prompt: str = ""
    """The run's prompt (its first line is the provenance of the cells the run writes)."""
    seen: dict[str, str] = field(default_factory=dict)
    """By cell id, the hash of the source the run last saw: in the notebook when the prompt was
    sent, read, or written. An edit that names no hash is checked against it."""


@dataclass(slots=True)
class ToolContext:
    """What a running tool may use."""

    root_dir: Path
    session_id: str
    request_id: str
    tool_call_id: str
    report: Callable[[str], None] = lambda title: None
    """Show a progress title on the tool card (TOOL_RUNNING)."""
    kernel: KernelBridge | None = None
    process: ProcessSink = field(default_factory=_NoProcess)
    """Report progress of a long operation (PROCESS_EVENT) and skill lifecycle (SKILL_*)."""
    variables_at_prompt: list[str] | None = None
    """The kernel's variables, one summary line each, as the ``%neta`` cell saw them."""
    kernel_wait: float = DEFAULT_KERNEL_WAIT
    """Seconds introspection waits for a kernel that is running a cell."""
    scope: RunScope | None = None
    """The run, for tools that act on it (given to a parameter typed ``RunScope``)."""
    execution_timeout: float | None = None
    """Seconds code the call runs in the kernel may take (``None``: no limit): the runtime's
    ``execution_timeout``, at most the time the run has left."""
    notebook: RunNotebook | None = None
    """The run's notebook (``notebook`` tools; ``None`` without a server or a notebook)."""
    approved: Callable[[str | None], bool] | None = None
    """Set when the user approved the call: whether the state the tool is about to act on (what
    its ``Tool.binding`` reads) is the one they were shown. A tool that reads that state again
    to act on it checks it here, so nothing changed in between runs unapproved."""


ToolFunction = Callable[..., Awaitable[ToolResult | str]]
PreviewFunction = Callable[["ToolContext", dict[str, Any]], Awaitable[dict[str, Any] | None]]
"""What a call would do, for its permission prompt (``PermissionAskData.preview``)."""
BindingFunction = Callable[["ToolContext", dict[str, Any]], Awaitable[str | None]]
"""The state, besides its arguments, a call would act on (a cell's whole source), as it is now."""


@dataclass(frozen=True, slots=True)
class Tool:
    """A registered tool."""

    name: str
    description: str
    function: ToolFunction
    arguments_model: type[BaseModel]
    readonly: bool = False
    host: ToolHost = "server"
    starts_runs: bool = False
    """It starts child runs: not offered to a run that may not start any (too deep a child)."""
    scope_parameter: str | None = None
    """The parameter typed ``RunScope``, filled with the run's scope (not an argument)."""
    preview: PreviewFunction | None = None
    """Shows what a call would change (a diff, the code to run) when it asks permission."""
    binding: BindingFunction | None = None
    """Reads the state the call acts on: an approval holds only while it is unchanged."""
    crew_only: bool = False
    """Offered only to the runs of a crew's tasks."""
    mcp_server: str | None = None
    """The MCP server offering it; ``None`` for neta's own tools."""
    mcp_tool: str | None = None
    """Its name on that server (the name the model sees may be cut to fit, see ``mcp.tools``)."""
    path_arguments: tuple[str, ...] = ()
    """Arguments that name a file under the root: permission rules match them resolved there."""
    also_does: Callable[[dict[str, Any]], str | None] | None = None
    """The other tool a call also does, by its arguments (an insert that runs its cell:
    ``run_cell``): the permission rules of both apply, the stricter decides."""

    @property
    def definition(self) -> ToolDefinition:
        """The tool as offered to a model (built once: every model call asks for it)."""
        return _definition(self.name, self.description, self.arguments_model)

    def parse_arguments(self, arguments: str) -> dict[str, Any]:
        """Validate the model's argument JSON; a bad one becomes a clear :class:`ToolError`."""
        raw = json_arguments(self.name, arguments)
        try:
            parsed = self.arguments_model.model_validate(raw)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in exc.errors()
            )
            raise ToolError(f"invalid arguments for {self.name}: {problems}") from exc
        return {name: getattr(parsed, name) for name in type(parsed).model_fields}

    async def run(self, arguments: str, ctx: ToolContext) -> ToolResult:
        """Validate and run; a plain string return becomes a :class:`ToolResult`."""
        kwargs: dict[str, Any] = self.parse_arguments(arguments)
        if self.scope_parameter is not None:
            if ctx.scope is None:
                raise ToolError(f"{self.name} acts on its run and can only run inside one")
            kwargs[self.scope_parameter] = ctx.scope
        result = await self.function(ctx, **kwargs)
        return ToolResult(result) if isinstance(result, str) else result


def json_arguments(name: str, arguments: str) -> dict[str, Any]:
    """A call's arguments as the JSON object they must be (empty text: none), else a ToolError."""
    try:
        raw = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError as exc:
        raise ToolError(invalid_json_message(name, arguments, exc)) from exc
    if not isinstance(raw, dict):
        raise ToolError(f"arguments of {name} must be a JSON object")
    return raw


def invalid_json_message(name: str, arguments: str, exc: json.JSONDecodeError) -> str:
    """What the model is told about a call whose arguments do not parse."""
    shown = arguments if len(arguments) <= 200 else f"{arguments[:200]}…"
    return (
        f"the arguments of {name} are not valid JSON ({exc.msg} at character {exc.pos}), so the "
        f"call was not run; the reply was probably cut off before the call was complete. "
        f"Received: {shown}"
    )


@functools.lru_cache(maxsize=512)
def _definition(name: str, description: str, model: type[BaseModel]) -> ToolDefinition:
    schema = model.model_json_schema()
    schema.pop("title", None)
    return ToolDefinition(name, description, schema)


def _scope_parameter(function: ToolFunction) -> str | None:
    """The parameter typed ``RunScope``, if the tool has one."""
    hints = get_type_hints(function, include_extras=True)
    return next((name for name, hint in hints.items() if hint is RunScope), None)


def _arguments_model(name: str, function: ToolFunction) -> type[BaseModel]:
    """A pydantic model of the model's arguments: every parameter after ``ctx`` but the scope."""
    signature = inspect.signature(function)
    hints = get_type_hints(function, include_extras=True)
    fields: dict[str, Any] = {}
    for index, (pname, param) in enumerate(signature.parameters.items()):
        if index == 0 or hints.get(pname) is RunScope:
            continue  # the ToolContext and the run's scope are not the model's to give
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[pname] = (hints.get(pname, Any), default)
    config = ConfigDict(extra="forbid")
    model: type[BaseModel] = create_model(f"{name}_arguments", __config__=config, **fields)
    return model


def tool(
    *,
    name: str | None = None,
    readonly: bool = False,
    host: ToolHost = "server",
    starts_runs: bool = False,
    crew_only: bool = False,
    paths: tuple[str, ...] = (),
) -> Callable[[ToolFunction], Tool]:
    """Make a :class:`Tool` of an ``async def f(ctx, …)``; its docstring is the description."""

    def wrap(function: ToolFunction) -> Tool:
        tool_name = name or function.__name__
        return Tool(
            name=tool_name,
            description=inspect.cleandoc(function.__doc__ or tool_name),
            function=function,
            arguments_model=_arguments_model(tool_name, function),
            readonly=readonly,
            host=host,
            starts_runs=starts_runs,
            scope_parameter=_scope_parameter(function),
            crew_only=crew_only,
            path_arguments=paths,
        )

    return wrap


class ToolSource(Protocol):
    """Tools that come from elsewhere (an MCP server) and may need starting before a run sees them.

    A source registers its tools in the registry once they are known; until then it *claims* the
    names it may offer, so a stored run waiting on one of them can still be continued.
    """

    def claims(self, name: str) -> bool:
        """Whether ``name`` is a tool this source may offer once started."""
        ...

    async def prepare(self, names: list[str] | None, progress: ProcessSink) -> None:
        """Have the tools a run may use (``names``; ``None``: any) registered, reporting progress.

        Never raises for a source that cannot start: its tools are then simply not offered.
        """
        ...

    async def aclose(self) -> None:
        """Stop whatever the source started."""
        ...


class KnownNames(Collection[str]):
    """The registered tool names, and the names a tool source not yet started may offer."""

    def __init__(self, names: list[str], sources: list[ToolSource]) -> None:
        self._names = names
        self._set = set(names)
        self._sources = sources

    def __contains__(self, name: object) -> bool:
        return name in self._set or (
            isinstance(name, str) and any(s.claims(name) for s in self._sources)
        )

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


class ToolRegistry:
    """The tools a runtime offers, by name, and the sources that add tools when they start."""

    def __init__(self, tools: list[Tool] | None = None) -> None:
        self._tools: dict[str, Tool] = {}
        self.sources: list[ToolSource] = []
        for t in tools or []:
            self.register(t)

    def add_source(self, source: ToolSource) -> None:
        """Have runs prepare ``source`` before they see the registry's tools."""
        self.sources.append(source)

    def known(self) -> KnownNames:
        """Names a run may rely on: registered, or claimed by a source not yet started."""
        return KnownNames(self.names(), self.sources)

    def register(self, t: Tool) -> None:
        """Add or replace a tool."""
        self._tools[t.name] = t

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, if any."""
        return self._tools.get(name)

    def names(self) -> list[str]:
        """Registered names, in registration order."""
        return list(self._tools)

    def select(
        self,
        names: list[str] | None,
        *,
        kernel_attached: bool,
        may_start_runs: bool = True,
        notebook_attached: bool = False,
        crew_task: bool = False,
    ) -> list[Tool]:
        """The tools for one run: those named (all when None), with the tools it may use.

        Kernel tools come only with a kernel, notebook tools only with a notebook, tools that
        start child runs only when the run may start them.
        """
        chosen = (
            self._tools.values()
            if names is None
            else [self._tools[n] for n in names if n in self._tools]
        )
        return [
            t
            for t in chosen
            if (kernel_attached or t.host != "kernel")
            and (notebook_attached or t.host != "notebook")
            and (may_start_runs or not t.starts_runs)
            and (crew_task or not t.crew_only)
        ]
