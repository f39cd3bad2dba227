"""Runtime settings, filled from traitlets by the server or from flags by the CLI and kernel."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..providers.images import DEFAULT_MAX_BYTES, DEFAULT_MAX_SIDE, ImageLimits
from ..tools.permissions import DEFAULT_RULES, PermissionRule
from ..tools.registry import DEFAULT_KERNEL_WAIT

DEFAULT_SYSTEM_PROMPT = (
    "You are neta, a data-science assistant working inside the user's Jupyter notebook. "
    "Use the tools to look at files and at the user's variables before answering: read_file "
    "for what a file says, list_files to find a file, list_variables and inspect_variable for "
    "the user's variables, python to compute or plot, send_file to hand the user a file they "
    "asked for. Answer from what the tools return, in concise markdown."
)

COMPACT_SYSTEM_PROMPT = """\
You work in the user's Jupyter notebook. You see their files and Python variables only through \
tools: to answer a question about a file or a variable, call a tool first, then answer from \
its result in one or two sentences.
- What a file says: read_file {"path": "notes.txt"}
- Which files exist: list_files {}
- Counts, sums or averages over a CSV: python {"code": "import pandas as pd\\n\
t = pd.read_csv('table.csv')\\nprint(len(t))"}
- The user's variables: list_variables {}; one dataframe: inspect_variable {"name": "df"}
- A plot: python {"code": "df['x'].plot(kind='hist')\\nimport matplotlib.pyplot as plt\\n\
plt.show()"}"""
"""For small models and context windows (an endpoint's ``compact: true``)."""

COMPACT_NOTEBOOK_PROMPT = """\
You work in the user's Jupyter notebook. You see their files and Python variables through \
tools, and their notebook in the map below. Answer in one or two sentences from what a tool \
returned or the map shows; change cells only when the user asks for a change.
- A question about a cell or its error: answer from the map; read_notebook \
{"cell_id": "load"} shows a cell's whole output
- What a file says: read_file {"path": "notes.txt"}
- The user's variables: list_variables {}; one dataframe: inspect_variable {"name": "df"}
- A note (markdown) stating a result: insert_cell {"source": "print(df['x'].mean())", \
"run": true} computes it; your next call is insert_cell {"cell_type": "markdown", "source": \
"<the note, with the figure printed>"}
- Something the user wants in the notebook (a computation, a plot): insert_cell \
{"source": "print(df['x'].mean())", "run": true}
- A cell to fix or change: edit_cell {"cell_id": "load", "source": "<its whole source, \
corrected>", "run": true}
Name cells by their ids when you talk about them."""
"""The compact prompt of a run bound to a notebook: its code goes into cells the user sees."""

COMPACT_TOOLS = ("list_files", "read_file", "list_variables", "inspect_variable", "python")
"""The tools a compact endpoint's models are offered."""
COMPACT_BOUND_TOOLS = ("list_files", "read_file", "list_variables", "inspect_variable")
"""The compact tools of a run bound to a notebook: code goes into cells, not ``python`` (given
python, Qwen2.5-Coder 1.5B fixed a failing cell and wrote a markdown cell by running hidden code
instead; docs/models.md)."""
COMPACT_NOTEBOOK_TOOLS = (
    "read_notebook",
    "insert_cell",
    "edit_cell",
    "delete_cell",
    "move_cell",
    "run_cell",
)
"""And, in a run bound to a notebook, the notebook tools (the work it is started for)."""

TOOL_FAILURE_REMINDER = (
    "Several steps in a row had only failing tool calls. Do not repeat the same call: read the "
    "error messages, try a different approach, or explain the problem to the user."
)

ANSWER_AFTER_FAILURE_REMINDER = (
    "Your last tool call failed, and you answered without trying again. Its error message says "
    "what would succeed: make that call now, or, if it cannot succeed, tell the user plainly that "
    "it failed and why. Do not state results you did not get from a tool."
)

MAX_STEPS_TEXT = (
    "I stopped here because this run reached its limit of {max_steps} steps. "
    "Send a follow-up message to let me continue."
)

REPLY_TOO_LONG_TEXT = (
    "The model's reply was stopped at {limit}, the most one reply may have; what it wrote so far "
    "is above, and any tool calls it was writing were not run."
)


@dataclass(frozen=True, slots=True)
class UploadQuota:
    """How much a user may keep uploaded, and for how long."""

    bytes: int = 200 * 1024 * 1024
    """``0``: no limit."""
    retention: float = 7 * 86_400.0
    """Seconds an upload is kept; ``0``: for ever."""


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
    execution_timeout: float | None = None
    """Seconds one execution in the kernel (``python``, a notebook cell) may run before the
    kernel is interrupted (``None``: as long as the run has left)."""
    permission_rules: list[PermissionRule] = field(default_factory=lambda: list(DEFAULT_RULES))
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    compact_system_prompt: str = COMPACT_SYSTEM_PROMPT
    """The system prompt of models whose endpoint says ``compact: true``."""
    compact_notebook_prompt: str = COMPACT_NOTEBOOK_PROMPT
    """Theirs in a run bound to a notebook."""
    max_event_output: int = 16_000
    """Characters of tool output carried in one event; the rest goes to an attachment."""
    max_attachment_bytes: int = 20 * 1024 * 1024
    """Largest file a user may attach (an upload, or what an attached URL serves)."""
    attachment_import_timeout: float = 30.0
    """Seconds an attached URL may take to download before the run fails."""
    max_reply_tokens: int = 100_000
    """Tokens of one model reply read before it is stopped (the model may ignore max_tokens)."""
    max_reply_bytes: int = 2_000_000
    """Bytes of one model reply (text, reasoning, tool-call arguments) read before it is stopped."""
    url_allowlist: tuple[str, ...] = ()
    upload_quota: UploadQuota = field(default_factory=UploadQuota)
    """Bytes of uploads (and imported URLs) one user may keep, and for how long."""
    max_active_runs_per_user: int = 50
    """Runs of one user going at once (children included) before a start answers 429; 0: any."""
    """Hosts (globs), addresses and networks an attached URL may reach though not public."""
    demo_pace: float = 0.015
    """Seconds between the demo model's tokens."""
    llm_max_retries: int = 3
    """Retries of one model call (rate limits, network, empty replies) before LLM_ERROR."""
    retry_base_delay: float = 1.0
    """First backoff in seconds; doubles per attempt."""
    retry_max_delay: float = 30.0
    """Longest wait between attempts, whatever Retry-After says."""
    prompt_budget: int = 120_000
    """Input tokens one request may use; over it the conversation is compacted first."""
    max_failed_tool_steps: int = 3
    """Consecutive steps whose tool calls all failed before the model gets a reminder."""
    recover_after_failure: bool = False
    """A model that answers right after a step whose calls all failed is asked, once per run, to
    retry as the failure says or to say plainly that it failed (a help for small models, at the
    cost of one more model step when the answer already said so)."""
    max_tool_calls_per_step: int = 16
    """Distinct tool calls one reply may run; the rest are answered as refused."""
    max_repeated_calls: int = 3
    """Steps in a row with exactly the same calls before the model is reminded; one more ends
    the run."""
    kernel_wait: float = DEFAULT_KERNEL_WAIT
    """Seconds ``list_variables`` / ``inspect_variable`` wait while the user's cell runs."""
    subagent_concurrency: int = 3
    """Sub-agents of one ``delegate`` call that run at the same time; the others queue."""
    subagent_depth: int = 1
    """How deep sub-agents may nest: 1 lets a run delegate but not its sub-agents."""
    suspend_timeout: float = 86_400.0
    """Seconds a run may wait for a person (an approval, an answer, a resume after a pause)
    before it is reclaimed with USER_NO_RESPONSE."""

    image_max_side: int = DEFAULT_MAX_SIDE
    """Longest side in pixels of a picture shown to a model; larger ones are scaled down."""
    image_max_bytes: int = DEFAULT_MAX_BYTES
    """Largest encoded picture shown to a model; larger ones are scaled down (as JPEG)."""
    max_images: int = 8
    """Pictures from tool calls sent as images in one request (the latest; older are named)."""

    skill_catalogue: Callable[[Path], list[tuple[str, str]]] | None = None
    """(name, description) of the skills available under a root, for the system prompt."""

    @property
    def image_limits(self) -> ImageLimits:
        """How large a picture shown to a model may be."""
        return ImageLimits(max(1, self.image_max_side), max(1, self.image_max_bytes))

    attachment_dir: Path | None = None
    """Where attachments' bytes are stored (``None``: ``attachments`` in the data dir); several
    servers sharing runs share this directory."""

    @property
    def attachments_dir(self) -> Path:
        """Where uploaded, imported and produced files are stored."""
        return self.attachment_dir or self.data_dir / "attachments"
