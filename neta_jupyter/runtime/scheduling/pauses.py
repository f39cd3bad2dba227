"""Why a paused run is suspended, and when a run that waits for a person is reclaimed."""

from __future__ import annotations

import time

from ...events import SuspendReason, SuspendType
from ..config import RuntimeConfig
from ..data.runs import Run

WAITS_FOR_PERSON = frozenset(
    {SuspendType.PERMISSION_ASK, SuspendType.CLARIFY_REQUEST, SuspendType.MANUAL_SUSPEND}
)
"""Suspensions a person ends (a shutdown's or an async tool's end otherwise)."""

PAUSED = SuspendReason(
    type=SuspendType.MANUAL_SUSPEND, message="paused by the user; resume the run to continue"
)
"""Why a run that was asked to pause is suspended."""


def deadline_of(run: Run, reason: SuspendReason, config: RuntimeConfig) -> float | None:
    """When a run suspended for ``reason`` is reclaimed (``None``: it waits for no person)."""
    if reason.type not in WAITS_FOR_PERSON:
        return None
    return time.time() + (run.options.suspend_timeout or config.suspend_timeout)
