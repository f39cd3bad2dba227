"""What a crew is: its agents, its tasks and the graph they make, checked before anything runs.

A definition is refused as a whole, with the field at fault named (and its line, when it came
from a file): an agent or task that does not exist, a cycle in ``depends_on``, a ``{placeholder}``
that names neither an input nor a task the task depends on, an input the caller did not give.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..runtime.errors import BadRunRequest

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_-]*)\}")
"""``{name}``: an input, or the output of an upstream task. Other braces are left as they are."""

MAX_TASKS = 100
MAX_AGENTS = 100
"""More agents than tasks could ever use is refused: each is checked (model, tools) at start."""
MAX_INPUTS = 100
MAX_PARALLEL = 16


class CrewDefinitionError(BadRunRequest):
    """A crew definition (or its inputs) that cannot run; ``field`` says where it is wrong."""

    code = "INVALID_CREW"

    def __init__(self, message: str, *, field: str | None = None, line: int | None = None) -> None:
        where = "" if field is None else f"{field}: "
        at = "" if line is None else f" (line {line})"
        super().__init__(f"{where}{message}{at}")
        self.field, self.line, self.reason = field, line, message


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class CrewInput(_Strict):
    """A value the crew is started with."""

    description: str | None = None
    default: str | None = None
    """Used when the caller gives none; without one the input is required."""


class CrewAgent(_Strict):
    """Who does a task: a role prompt, a model, the tools it may use, how long it may go on."""

    name: str = Field(min_length=1, max_length=80, pattern=r"^[A-Za-z0-9_.\- ]+$")
    role: str = Field(default="", max_length=8000, description="the agent's role prompt")
    model: str | None = Field(default=None, description="default: the server's default model")
    tools: list[str] | None = Field(default=None, description="default: every tool")
    max_steps: int | None = Field(default=None, ge=1, le=200)


class CrewTask(_Strict):
    """One unit of work, done by one agent as one child run."""

    id: str = Field(min_length=1, max_length=80, pattern=r"^[A-Za-z_][A-Za-z0-9_-]*$")
    agent: str
    description: str = Field(min_length=1, max_length=20_000)
    depends_on: list[str] = Field(default_factory=list, max_length=MAX_TASKS)
    expected_output: str | None = Field(default=None, max_length=4000)
    retries: int = Field(default=0, ge=0, le=10)
    """Attempts after the first before the task is escalated to a person."""
    approval: Literal["before", "after", "none"] = "none"
    """A person approves the task before it starts, or its output before dependents see it."""


class CrewDefinition(_Strict):
    """A crew: agents, and tasks whose ``depends_on`` make a graph without cycles."""

    name: str = Field(default="crew", min_length=1, max_length=120)
    description: str | None = None
    inputs: dict[str, CrewInput] = Field(default_factory=dict, max_length=MAX_INPUTS)
    agents: list[CrewAgent] = Field(min_length=1, max_length=MAX_AGENTS)
    tasks: list[CrewTask] = Field(min_length=1, max_length=MAX_TASKS)
    max_parallel: int = Field(default=2, ge=1, le=MAX_PARALLEL)
    """Tasks that run at once, at most."""

    @model_validator(mode="before")
    @classmethod
    def _inputs_as_names(cls, data: Any) -> Any:
        """``inputs: [a, b]`` is short for inputs without description or default."""
        if isinstance(data, dict) and isinstance(data.get("inputs"), list):
            names = data["inputs"]
            if all(isinstance(n, str) for n in names):
                return {**data, "inputs": {n: {} for n in names}}
        return data

    def agent(self, name: str) -> CrewAgent:
        """The agent called ``name`` (the definition was checked: it exists)."""
        return next(a for a in self.agents if a.name == name)

    def task(self, task_id: str) -> CrewTask:
        """The task ``task_id``."""
        return next(t for t in self.tasks if t.id == task_id)

    def upstream(self, task_id: str) -> set[str]:
        """Every task ``task_id`` depends on, directly or through others."""
        return _upstream({t.id: t for t in self.tasks}, task_id)


def _upstream(tasks: dict[str, CrewTask], task_id: str) -> set[str]:
    seen: set[str] = set()
    todo = list(tasks[task_id].depends_on)
    while todo:
        found = todo.pop()
        if found not in seen:
            seen.add(found)
            todo.extend(tasks[found].depends_on)
    return seen


def checked(data: Any) -> CrewDefinition:
    """The definition in ``data`` (a mapping, as from JSON or YAML), or a CrewDefinitionError."""
    if isinstance(data, CrewDefinition):
        definition = data
    else:
        try:
            definition = CrewDefinition.model_validate(data)
        except ValidationError as exc:
            error = exc.errors()[0]
            raise CrewDefinitionError(error["msg"], field=field_name(error["loc"])) from exc
    check_graph(definition)
    return definition


def field_name(loc: tuple[int | str, ...]) -> str:
    """``("tasks", 2, "agent")`` → ``tasks[2].agent``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "definition"


def check_graph(crew: CrewDefinition) -> None:
    """Names unique, references known, no cycle, every placeholder resolvable."""
    _unique([a.name for a in crew.agents], "agents", "name")
    _unique([t.id for t in crew.tasks], "tasks", "id")
    agents = {a.name for a in crew.agents}
    ids = [t.id for t in crew.tasks]
    known = set(ids)
    for index, task in enumerate(crew.tasks):
        if task.agent not in agents:
            raise CrewDefinitionError(
                f"unknown agent {task.agent!r}; agents: {', '.join(sorted(agents))}",
                field=f"tasks[{index}].agent",
            )
        for dep_index, dep in enumerate(task.depends_on):
            if dep not in known:
                raise CrewDefinitionError(
                    f"unknown task {dep!r}; tasks: {', '.join(ids)}",
                    field=f"tasks[{index}].depends_on[{dep_index}]",
                )
    _no_cycle(crew)
    by_id = {t.id: t for t in crew.tasks}
    for index, task in enumerate(crew.tasks):
        upstream = _upstream(by_id, task.id)
        for name in PLACEHOLDER.findall(task.description):
            if name in crew.inputs or name in upstream:
                continue
            hint = " (add it to depends_on)" if name in ids else ""
            raise CrewDefinitionError(
                f"placeholder {{{name}}} names neither an input nor a task this task depends "
                f"on{hint}",
                field=f"tasks[{index}].description",
            )


def _unique(names: list[str], where: str, key: str) -> None:
    seen: set[str] = set()
    for index, name in enumerate(names):
        if name in seen:
            raise CrewDefinitionError(f"{name!r} is used twice", field=f"{where}[{index}].{key}")
        seen.add(name)


def _no_cycle(crew: CrewDefinition) -> None:
    """Depth-first over ``depends_on``; a task met again on the current path closes a cycle."""
    index = {t.id: i for i, t in enumerate(crew.tasks)}
    by_id = {t.id: t for t in crew.tasks}
    done: set[str] = set()

    def visit(task_id: str, path: list[str]) -> None:
        if task_id in done:
            return
        if task_id in path:
            cycle = [*path[path.index(task_id) :], task_id]
            raise CrewDefinitionError(
                f"depends_on makes a cycle: {' -> '.join(cycle)}",
                field=f"tasks[{index[cycle[0]]}].depends_on",
            )
        for dep in by_id[task_id].depends_on:
            visit(dep, [*path, task_id])
        done.add(task_id)

    for task in crew.tasks:
        visit(task.id, [])


def resolve_inputs(crew: CrewDefinition, given: dict[str, str]) -> dict[str, str]:
    """Every input's value: given, or its default; unknown or missing ones refused."""
    if unknown := sorted(set(given) - set(crew.inputs)):
        known = ", ".join(sorted(crew.inputs)) or "none"
        raise CrewDefinitionError(
            f"unknown input {unknown[0]!r}; the crew's inputs: {known}",
            field=f"inputs.{unknown[0]}",
        )
    values: dict[str, str] = {}
    for name, spec in crew.inputs.items():
        value = given.get(name, spec.default)
        if value is None:
            raise CrewDefinitionError(
                "missing input: give it when starting the crew", field=f"inputs.{name}"
            )
        values[name] = value
    return values


def fill(text: str, values: dict[str, str]) -> str:
    """``text`` with each ``{name}`` it has a value for replaced by that value."""
    return PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text)
