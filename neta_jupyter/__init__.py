"""neta_jupyter: an AI agent for Jupyter notebooks with a live, resumable event stream."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .kernel import RunHandle

__version__ = "0.1.0"


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    from .server.app import NetaApp

    return [{"module": "neta_jupyter.server.app", "app": NetaApp}]


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


__all__ = ["__version__", "ask", "last_run", "load_ipython_extension", "unload_ipython_extension"]
