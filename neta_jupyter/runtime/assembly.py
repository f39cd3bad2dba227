"""How a run's loop is put together: its model, tools, kernel and system prompt.

The run's own choices come first, then its model endpoint's profile (a small model gets fewer
tools and a shorter prompt), then the runtime's configuration.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Protocol

from ..providers import ModelProfile
from .activation.loop import RunLoop
from .activation.process import ProcessLog, ProcessReporter
from .config import COMPACT_BOUND_TOOLS, COMPACT_NOTEBOOK_TOOLS, COMPACT_TOOLS
from .data.runs import Run, snapshot_problem
from .data.snapshots import SnapshotInvalid
from .host import NotebookFactory, RunHost
from .log.emitter import RunEmitter
from .scheduling.background import BackgroundJobs
from .trees.subagents import Subagents


class LoopHost(RunHost, Protocol):
    """What a loop is put together from: the host and the parts a run's tools reach."""

    notebooks: NotebookFactory | None

    @property
    def subagents(self) -> Subagents:
        """The child runs of runs (their prompt, whether a run may delegate)."""
        ...

    @property
    def background(self) -> BackgroundJobs:
        """Work of calls in the background."""
        ...


def assemble_loop(runtime: LoopHost, run: Run, emitter: RunEmitter) -> RunLoop:
    """A loop over ``run`` publishing through ``emitter``; refuses a snapshot it cannot run."""
    if problem := snapshot_problem(run, runtime.tools.known()):
        raise SnapshotInvalid(problem)
    kernel = runtime.kernels(run) if runtime.kernels is not None else None
    notebook = runtime.notebooks(run) if runtime.notebooks is not None else None
    if notebook is not None:  # what the run saw of the notebook, kept across activations
        notebook = dataclasses.replace(notebook, seen=run.state.cells_seen)
    profile = runtime.models.profile(run.model)
    config = runtime.config
    base = config.system_prompt
    if profile.compact:
        bound = notebook is not None
        base = config.compact_notebook_prompt if bound else config.compact_system_prompt
    return RunLoop(
        run,
        store=runtime.store,
        config=config,
        model=runtime.models.resolve(run.model),
        runs=runtime.runs,
        tools=runtime.tools.select(
            tool_names(run, profile),
            kernel_attached=kernel is not None,
            may_start_runs=runtime.subagents.may_delegate(run),
            notebook_attached=notebook is not None,
            crew_task=run.options.kind == "crew_task",
        ),
        kernel=kernel,
        notebook=notebook,
        emitter=emitter,
        system_prompt=runtime.subagents.system_prompt(base, run),
        subagents=runtime.subagents,
        images=profile.images,
        jobs=runtime.background,
    )


def tool_names(run: Run, profile: ModelProfile) -> list[str] | None:
    """The tools the run may use (``None``: every registered one)."""
    if run.options.tools:
        return run.options.tools
    if profile.tools is not None:
        return list(profile.tools)
    if not profile.compact:
        return None
    if run.options.notebook_path:
        return [*COMPACT_BOUND_TOOLS, *COMPACT_NOTEBOOK_TOOLS]
    return list(COMPACT_TOOLS)


async def prepare_tools(runtime: LoopHost, run: Run, emitter: RunEmitter) -> None:
    """Start the tool sources (MCP servers) the run may use; their start-up is in its timeline."""
    sources = runtime.tools.sources
    if not sources:
        return
    names = tool_names(run, runtime.models.profile(run.model))
    progress = ProcessReporter(
        emitter,
        ProcessLog(runtime.config.data_dir, emitter.redactor),
        session_id=run.session_id,
        tool_call_id=None,
    )
    try:
        for source in sources:
            await source.prepare(names, progress)
    except asyncio.CancelledError:
        progress.close("cancelled")
        raise
    progress.close("completed")
