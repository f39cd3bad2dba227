"""neta_jupyter: an AI agent for Jupyter notebooks with a live, resumable event stream."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .kernel import RunHandle
    from .kernel.crew import CrewHandle

from ._version import __version__


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    from .server.app import NetaApp

    return [{"module": "neta_jupyter.server.app", "app": NetaApp}]


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """The side panel's prebuilt extension (``jupyter labextension develop`` links it)."""
    return [{"src": "labextension", "dest": "neta-jupyter"}]


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext neta_jupyter``: the ``%neta`` and ``%%neta`` magics."""
    from .kernel import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext neta_jupyter``."""
    from .kernel import unload_ipython_extension as unload

    unload(ipython)


def last_run() -> RunHandle | None:
    """The latest run started in this kernel by ``%neta`` or ``ask`` (``await`` it to wait)."""
    from .kernel import last_run as latest

    return latest()


def ask(
    prompt: str,
    *,
    model: str | None = None,
    session: str | None = None,
    approve: str | None = None,
    max_steps: int | None = None,
    tools: list[str] | None = None,
    attach: Sequence[str | Path] = (),
    display: bool = True,
) -> RunHandle:
    """Ask the agent from Python; returns the run's handle at once (``await`` it to wait).

    In a notebook the run widget is displayed (``display=False`` to skip it). ``approve`` is
    ``ask`` (the widget asks before tools that need permission), ``auto`` or ``deny``. The run
    is created in the background: ``request_id`` is set as soon as the cell lets the kernel's
    loop run (``await run`` waits until the run is at rest). ``attach`` shows the model files
    with the prompt: paths on this machine, or http(s) URLs the server downloads.
    """
    from .kernel import ask as start

    return start(
        prompt,
        model=model,
        session=session,
        approve=approve,
        max_steps=max_steps,
        tools=tools,
        attach=attach,
        display=display,
    )


def crew(
    definition: Any,
    inputs: dict[str, str] | None = None,
    *,
    approve: str | None = None,
    display: bool = True,
) -> CrewHandle:
    """Run a crew of agents: its tasks run as agent runs in dependency order; returns at once.

    ``definition`` is a YAML or JSON file's path, YAML/JSON text, a mapping, or a
    :class:`~neta_jupyter.crews.CrewDefinition`; a bad one (a cycle, an unknown agent or task, a
    missing input) raises :class:`~neta_jupyter.crews.CrewDefinitionError` naming the field. In
    a notebook the crew's board shows below the cell. ``await`` the handle to wait for the end;
    ``await crew.decide(task, "retry")`` answers what it waits for.
    """
    from .kernel import current_context
    from .kernel.context import default_approve
    from .kernel.crew import start_crew

    ctx = current_context()
    handle = start_crew(
        ctx.host, definition, inputs, approve=approve or default_approve(), display=display
    )
    ctx.last_crew = handle
    return handle


def last_crew() -> CrewHandle | None:
    """The latest crew started in this kernel (by ``crew`` or ``%neta crew run``)."""
    from .kernel import current_context

    found: CrewHandle | None = current_context().last_crew
    return found


__all__ = [
    "__version__",
    "ask",
    "crew",
    "last_crew",
    "last_run",
    "load_ipython_extension",
    "unload_ipython_extension",
]
