"""The composition root: settings shared by every host, and the one function that builds a runtime.

The server (``NetaApp``), the terminal client and the embedded kernel host all build their runtime
with :func:`build_runtime`, so a tool, a model endpoint or a permission rule configured once is
there wherever a run starts. :class:`NetaSettings` holds the settings they share as traitlets, so
``c.NetaApp.<trait>`` in a Jupyter config file means the same thing to the server (``NetaApp``
inherits them) and to ``neta-jupyter run`` (which reads the same files).
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from typing import Any

from jupyter_core.paths import jupyter_config_dir
from traitlets import Dict, Float, Int, List, Unicode
from traitlets.config import Configurable

from ..mcp import build as mcp_build
from ..mcp.relay import DEFAULT_MAX_RESULT_BYTES
from ..providers import ModelRegistry
from ..providers.images import DEFAULT_MAX_BYTES, DEFAULT_MAX_SIDE
from ..store import Store
from ..store.retention import DEFAULT_RETENTION
from ..tools import PermissionRule, Tool, ToolRegistry, builtin_tools
from ..tools.kernel_tools import kernel_tools
from ..tools.notebook_tools import notebook_tools
from ..tools.registry import DEFAULT_KERNEL_WAIT
from ..tools.skills import skill_catalogue
from .config import RuntimeConfig, UploadQuota
from .host import KernelFactory, NotebookFactory
from .manager import Runtime

__all__ = ["NetaSettings", "build_runtime", "import_tool"]


class NetaSettings(Configurable):
    """How runs behave, wherever they run; configure with ``c.NetaApp.<trait>``."""

    model = Unicode(
        "demo", help="Default model, as provider:model (e.g. openai:gpt-4.1-mini)."
    ).tag(config=True)
    permission_rules = List(
        Dict(),
        default_value=[
            {
                "tool": "python",
                "action": "ask",
                "description": "running code in your kernel needs approval",
            }
        ],
        help="Rules {tool, args, action: allow|ask|deny, description}; the first match decides.",
    ).tag(config=True)
    event_retention = Float(
        DEFAULT_RETENTION,
        help="Seconds a finished (completed or failed) run's events are kept, a week by default; "
        "then its event stream answers 410 EVENTS_EXPIRED, while its status, its messages in "
        "the session tree and its attachments stay. A crew's log is kept as long after the "
        "crew ended. 0 keeps them forever. The events of a run that is running or suspended "
        "are never deleted.",
    ).tag(config=True)
    max_steps = Int(20, help="Model calls one run may make before it stops with MAX_STEPS.").tag(
        config=True
    )
    task_timeout = Float(1800.0, help="Seconds one run may execute before TASK_TIMEOUT.").tag(
        config=True
    )
    execution_timeout = Float(
        0.0,
        help="Seconds one execution in the notebook's kernel (the python tool, a notebook cell) "
        "may run before the kernel is interrupted and the call fails; 0: as long as the run has "
        "left of its task_timeout.",
    ).tag(config=True)
    demo_pace = Float(0.015, help="Seconds between the demo model's tokens.").tag(config=True)
    kernel_wait = Float(
        DEFAULT_KERNEL_WAIT,
        help="Seconds list_variables and inspect_variable wait for the notebook's kernel while a "
        "cell runs (python, once approved, waits as long as the run may).",
    ).tag(config=True)
    endpoints = Dict(
        help="Named model endpoints: {name: {kind: openai|anthropic, base_url, api_key_env, "
        "models}}; select one as 'name:model'. Keys come from environment variables only.",
    ).tag(config=True)
    prompt_budget = Int(120_000, help="Input tokens one model request may use.").tag(config=True)
    llm_max_retries = Int(3, help="Retries of one model call before LLM_ERROR.").tag(config=True)
    max_tool_calls_per_step = Int(
        16, help="Distinct tool calls one model reply may run; the rest are refused."
    ).tag(config=True)
    subagent_concurrency = Int(
        3, help="Sub-agents of one delegate call that run at the same time; the others queue."
    ).tag(config=True)
    subagent_depth = Int(
        1,
        help="How deep sub-agents may nest: 1 lets a run delegate but not its sub-agents, 0 "
        "turns delegation off.",
    ).tag(config=True)
    suspend_timeout = Float(
        86_400.0,
        help="Seconds a run may wait for a person (a permission ask, a question, a pause) before "
        "it is stopped with USER_NO_RESPONSE; a run request's suspendTimeout overrides it.",
    ).tag(config=True)
    max_attachment_bytes = Int(
        20 * 1024 * 1024,
        help="Largest file a user may attach to a prompt (an upload, or what an attached URL "
        "serves); a larger upload is refused with 413, a larger URL fails the run.",
    ).tag(config=True)
    attachment_import_timeout = Float(
        30.0, help="Seconds the server waits for an attached URL to download."
    ).tag(config=True)
    max_reply_tokens = Int(
        100_000,
        help="Tokens of one model reply the server reads, whatever max_tokens the model was "
        "sent (a server may ignore it); counted as the deltas received, or a quarter of the "
        "bytes when that is more. Past it the reply is stopped and the run ends with "
        "finishReason REPLY_TOO_LONG.",
    ).tag(config=True)
    max_reply_bytes = Int(
        2_000_000,
        help="Bytes of one model reply (text, reasoning and tool-call arguments) the server "
        "reads; past it the reply is stopped and the run ends with finishReason REPLY_TOO_LONG.",
    ).tag(config=True)
    max_active_runs_per_user = Int(
        50,
        help="Runs of one user going at once (their sub-agents and crew tasks included); one "
        "more start, or a crew's, answers 429 RUN_QUOTA_EXCEEDED. 0: no limit.",
    ).tag(config=True)
    max_upload_bytes_per_user = Int(
        200 * 1024 * 1024,
        help="Bytes of uploads and imported URLs one user may keep stored; a file past it "
        "answers 429 ATTACHMENT_QUOTA_EXCEEDED (an attached URL fails the run). 0: no limit.",
    ).tag(config=True)
    upload_retention = Float(
        7 * 86_400.0,
        help="Seconds an upload (or imported URL) is kept; older ones are deleted before the "
        "user's next one is stored and when the server starts. 0 keeps them for ever.",
    ).tag(config=True)
    url_allowlist = List(
        Unicode(),
        help="Hosts (globs such as '*.corp.example'), addresses and networks ('10.0.0.0/8') "
        "that attached URLs and webhooks may reach although they are not public. Anything else "
        "that resolves to a loopback, link-local, private or otherwise non-public address, or "
        "to one of the server's own, is refused (after every redirect).",
    ).tag(config=True)
    image_max_side = Int(
        DEFAULT_MAX_SIDE,
        help="Longest side in pixels of a picture shown to a model (a figure, an MCP image, an "
        "attached picture); a larger one is scaled down first.",
    ).tag(config=True)
    image_max_bytes = Int(
        DEFAULT_MAX_BYTES,
        help="Largest encoded picture shown to a model; a larger one is scaled down further "
        "and sent as JPEG.",
    ).tag(config=True)
    extra_tools = List(
        Unicode(), help="Import strings 'module:attribute' of extra Tool objects to offer."
    ).tag(config=True)
    mcp_servers = Dict(
        help="MCP servers whose tools runs may use, in the mcpServers shape of mcp.json: {name: "
        "{command, args, env, cwd}} or {name: {url, headers}}; '${VAR}' is read from the "
        "environment. Merged over mcp.json in the Jupyter config dir.",
    ).tag(config=True)
    mcp_start_timeout = Float(
        30.0,
        help="Seconds an MCP server may take to start (a server's 'startTimeout' overrides it).",
    ).tag(config=True)
    scripted_models_dir = Unicode(
        "",
        help="For tests and benchmarks only: the folder whose JSON scripts a run may name as "
        "'scripted:<file>'. Empty (the default) turns scripted models off, so no run request "
        "and no model's delegate call reaches a file through a model name.",
    ).tag(config=True)
    mcp_call_timeout = Float(
        600.0, help="Seconds one MCP tool call may take (a server's 'timeout' overrides it)."
    ).tag(config=True)
    mcp_max_result_bytes = Int(
        DEFAULT_MAX_RESULT_BYTES,
        help="Largest message an MCP server (stdio or HTTP) may send (a tool's result, images "
        "included, base64-encoded); a larger result fails the call (TOOL_FAILED) unread.",
    ).tag(config=True)

    def runtime_config(self, *, root_dir: Path, data_dir: Path) -> RuntimeConfig:
        """The settings as the runtime takes them, for runs reading files under ``root_dir``."""
        return RuntimeConfig(
            root_dir=root_dir,
            data_dir=data_dir,
            default_model=self.model,
            max_steps=self.max_steps,
            task_timeout=self.task_timeout,
            execution_timeout=self.execution_timeout if self.execution_timeout > 0 else None,
            permission_rules=[PermissionRule.model_validate(r) for r in self.permission_rules],
            demo_pace=self.demo_pace,
            prompt_budget=self.prompt_budget,
            llm_max_retries=self.llm_max_retries,
            max_tool_calls_per_step=self.max_tool_calls_per_step,
            skill_catalogue=skill_catalogue,
            kernel_wait=self.kernel_wait,
            subagent_concurrency=max(1, self.subagent_concurrency),
            subagent_depth=max(0, self.subagent_depth),
            suspend_timeout=self.suspend_timeout,
            max_attachment_bytes=max(1, self.max_attachment_bytes),
            attachment_import_timeout=self.attachment_import_timeout,
            url_allowlist=tuple(self.url_allowlist),
            upload_quota=UploadQuota(
                max(0, self.max_upload_bytes_per_user), max(0.0, self.upload_retention)
            ),
            max_active_runs_per_user=max(0, self.max_active_runs_per_user),
            max_reply_tokens=max(1, self.max_reply_tokens),
            max_reply_bytes=max(1, self.max_reply_bytes),
            image_max_side=max(16, self.image_max_side),
            image_max_bytes=max(1024, self.image_max_bytes),
        )


def build_runtime(
    settings: NetaSettings,
    store: Store,
    *,
    root_dir: Path,
    data_dir: Path,
    kernels: KernelFactory | None = None,
    notebooks: NotebookFactory | None = None,
    logger: logging.Logger | None = None,
    mcp_config_dir: Path | None = None,
    attachment_dir: Path | None = None,
) -> Runtime:
    """A runtime with every built-in tool, skills and the tools of the configured MCP servers.

    Kernel tools run through ``kernels``. MCP servers come from ``mcp.json`` in
    ``mcp_config_dir`` (by default the Jupyter config dir) and ``c.NetaApp.mcp_servers``; each
    starts when a run first may use it.

    Attachments' bytes go to ``attachment_dir`` (default: ``attachments`` in ``data_dir``).

    Raises ``ValueError`` for settings that cannot be used (a malformed endpoint or rule) and
    ``ImportError``/``TypeError`` for an extra tool that cannot be loaded.
    """
    config = settings.runtime_config(root_dir=root_dir, data_dir=data_dir)
    config.attachment_dir = attachment_dir
    store.records.attachment_dir = config.attachments_dir
    tools = ToolRegistry(
        builtin_tools()
        + kernel_tools()
        + notebook_tools()
        + [import_tool(s) for s in settings.extra_tools]
    )
    runtime = Runtime(
        store,
        config,
        models=ModelRegistry(
            demo_pace=config.demo_pace,
            endpoints=settings.endpoints,
            scripts=Path(settings.scripted_models_dir) if settings.scripted_models_dir else None,
        ),
        tools=tools,
        kernels=kernels,
        notebooks=notebooks,
        logger=logger,
    )
    mcp_build(
        settings.mcp_servers,
        Path(mcp_config_dir or jupyter_config_dir()),
        redactor=store.redactor,
        logger=runtime.log,
        start_timeout=settings.mcp_start_timeout,
        call_timeout=settings.mcp_call_timeout,
        max_result_bytes=settings.mcp_max_result_bytes,
    ).attach(tools)
    return runtime


def import_tool(spec: str) -> Tool:
    """The :class:`Tool` named by ``'module:attribute'``."""
    module_name, _, attribute = spec.partition(":")
    value: Any = getattr(importlib.import_module(module_name), attribute)
    if not isinstance(value, Tool):
        raise TypeError(f"{spec} is not a neta_jupyter Tool")
    return value
