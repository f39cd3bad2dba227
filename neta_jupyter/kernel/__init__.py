"""The notebook side: ``%neta`` magics, ``ask()``, finding the server, the embedded host.

Runs are created on the Jupyter server that started this kernel when it runs the extension
(server mode), otherwise on a runtime embedded in the kernel's own event loop (embedded mode).
Either way a prompt displays the run widget and returns at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..client import RunRequest
from ..client import attachment_sources as attachments
from ..providers.base import THINKING_LEVELS
from ..runtime.requests import APPROVE_MODES
from .context import KernelContext, current_context, default_approve, notebook_file
from .handle import RunHandle
from .host import Host, HostError


def last_run() -> RunHandle | None:
    """The handle of the latest run started in this kernel (``await`` it to wait for it)."""
    return current_context().last


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext neta_jupyter``: register ``%neta`` / ``%%neta``."""
    from .magics import NetaMagics
    from .options import protect_question_marks

    ipython.register_magics(NetaMagics(ipython, current_context(ipython)))
    cleanup = ipython.input_transformers_cleanup
    if protect_question_marks not in cleanup:
        cleanup.append(protect_question_marks)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext neta_jupyter``."""
    from .options import protect_question_marks

    if protect_question_marks in ipython.input_transformers_cleanup:
        ipython.input_transformers_cleanup.remove(protect_question_marks)
    ipython.magics_manager.magics["line"].pop("neta", None)
    ipython.magics_manager.magics["cell"].pop("neta", None)


def ask(
    prompt: str,
    *,
    model: str | None = None,
    session: str | None = None,
    approve: str | None = None,
    max_steps: int | None = None,
    tools: list[str] | None = None,
    thinking: str | None = None,
    attach: Sequence[str | Path] = (),
    display: bool = True,
) -> RunHandle:
    """Start a run and return its handle at once (``await`` the handle to wait for it).

    ``session`` defaults to the notebook's conversation; ``approve`` is ``ask`` (the widget asks),
    ``auto`` or ``deny`` (headless runs). ``thinking`` (``off``, ``low``, ``medium``, ``high``)
    sets how hard a reasoning model thinks in this run. ``attach``: files the model is shown with
    the prompt, paths on this machine (uploaded) or http(s) URLs (the server downloads them).
    """
    urls, files = attachments(attach)
    approve = approve or default_approve()
    if approve not in APPROVE_MODES:
        raise ValueError("approve must be 'ask', 'auto' or 'deny'")
    if thinking is not None and thinking not in THINKING_LEVELS:
        raise ValueError(f"thinking must be one of {', '.join(THINKING_LEVELS)}")
    context = current_context()
    options = RunRequest.model_validate(
        {
            "content": prompt,
            "session_name": session or context.session(),
            "model": model,
            "max_steps": max_steps,
            "approve": approve,
            "tools": tools,
            "notebook_path": notebook_file(context.shell.user_ns),
            "thinking_level": thinking,
            "attachments": urls,
        }
    )
    return context.launch(options, display=display, files=files)


__all__ = [
    "Host",
    "HostError",
    "KernelContext",
    "RunHandle",
    "RunRequest",
    "ask",
    "current_context",
    "load_ipython_extension",
    "unload_ipython_extension",
]
