"""Runtime settings, filled from traitlets by the server or from flags by the CLI and kernel."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..tools.permissions import DEFAULT_RULES, PermissionRule

DEFAULT_SYSTEM_PROMPT = (
    "You are neta, a data-science assistant working inside the user's Jupyter notebook. "
    "Use the tools to look at files and at the user's variables before answering; run code "
    "only when it helps. Answer in concise markdown."
)

MAX_STEPS_TEXT = (
    "I stopped here because this run reached its limit of {max_steps} steps. "
    "Send a follow-up message to let me continue."
)


@dataclass(slots=True)
class RuntimeConfig:
    """How runs behave."""

    root_dir: Path
    """Files tools may read live under here."""
    data_dir: Path
    """Attachments and logs are written under here."""
    default_model: str = "demo"
    max_steps: int = 20
    task_timeout: float = 1800.0
    """Seconds one activation of a run may take before TASK_TIMEOUT."""
    permission_rules: list[PermissionRule] = field(default_factory=lambda: list(DEFAULT_RULES))
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    max_event_output: int = 16_000
    """Characters of tool output carried in one event; the rest goes to an attachment."""
    demo_pace: float = 0.015
    """Seconds between the demo model's tokens."""

    @property
    def attachments_dir(self) -> Path:
        """Where produced files are stored."""
        return self.data_dir / "attachments"
