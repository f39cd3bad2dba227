"""The configuration reference, written from the traitlets of ``NetaSettings`` and ``NetaApp``.

As jupyter-server's documentation does for its own options: iterate the configurable classes'
traits tagged ``config=True`` and write each one's name, type, default and help. Only the traits
neta defines are listed; those ``NetaApp`` inherits from jupyter-server's ``ExtensionApp`` are
documented by jupyter-server.
"""

from __future__ import annotations

import textwrap

from traitlets import TraitType
from traitlets.config import Configurable

# Where a setting is explained at length: the page and section (a MyST link target).
SEE_ALSO = {
    "endpoints": "../models.md",
    "permission_rules": "../configuration.md#permission-rules",
    "mcp_servers": "../mcp.md",
    "mcp_start_timeout": "../mcp.md#when-servers-run",
    "mcp_call_timeout": "../mcp.md#when-servers-run",
    "execution_timeout": "../user-guide/long-work.md#how-long-code-may-run",
    "webhooks": "../user-guide/long-work.md#webhooks",
    "webhook_retries": "../user-guide/long-work.md#webhooks",
    "webhook_retry_delay": "../user-guide/long-work.md#webhooks",
    "suspend_timeout": "../user-guide/long-work.md#pausing-a-run-and-runs-left-waiting",
    "event_retention": "../deployment.md#how-long-a-run-s-events-are-kept",
    "image_max_side": "../models.md#pictures-and-models",
    "image_max_bytes": "../models.md#pictures-and-models",
    "image_hosts": "../security.md#what-model-output-can-do-in-the-page",
    "store_url": "../deployment.md#storing-runs-in-redis",
    "store_user": "../deployment.md#jupyterhub",
    "lease_ttl": "../deployment.md#running-on-several-servers",
    "sweep_interval": "../deployment.md#running-on-several-servers",
    "handoff_timeout": "../deployment.md#running-on-several-servers",
    "attachment_dir": "../deployment.md#running-on-several-servers",
    "activity_interval": "../deployment.md#one-server-per-data-directory",
    "stream_compression": "../performance.md#compressed-streams",
    "kernel_wait": "../user-guide/notebook.md#a-busy-kernel",
    "max_attachment_bytes": "../user-guide/files.md",
    "attachment_import_timeout": "../user-guide/files.md",
    "subagent_concurrency": "../runtime.md",
    "subagent_depth": "../runtime.md",
    "prompt_budget": "../runtime.md",
    "max_tool_calls_per_step": "../models.md#local-servers",
    "max_reply_tokens": "../models.md#local-servers",
    "max_reply_bytes": "../models.md#local-servers",
    "mcp_max_result_bytes": "../mcp.md",
    "url_allowlist": "../security.md#what-a-model-or-a-request-cannot-do",
    "scripted_models_dir": "../security.md#what-a-model-or-a-request-cannot-do",
    "max_steps": "../user-guide/long-work.md",
    "task_timeout": "../user-guide/long-work.md#how-long-code-may-run",
    "model": "../models.md",
    "data_dir": "../deployment.md#one-server-per-data-directory",
    "db_path": "../storage-failures.md",
}


def trait_section(owner: str, name: str, trait: TraitType) -> str:  # type: ignore[type-arg]
    """One setting: an anchor, its name as a heading, type and default, help, link."""
    help_text = textwrap.dedent(trait.help).strip() or "(no description)"
    lines = [
        f"(config-{name})=",
        f"### `c.{owner}.{name}`",
        "",
        f"*{trait.info()}*, default `{trait.default_value_repr()}`",
        "",
        help_text,
    ]
    if name in SEE_ALSO:
        lines += ["", f"See [more about it]({SEE_ALSO[name]})."]
    return "\n".join(lines) + "\n"


def class_section(cls: type[Configurable], owner: str, title: str, intro: str) -> str:
    """Every configurable trait ``cls`` itself defines, by name."""
    traits = cls.class_own_traits(config=True)
    parts = [f"## {title}\n\n{intro}\n"]
    parts += [trait_section(owner, name, traits[name]) for name in sorted(traits)]
    return "\n".join(parts)


def config_reference() -> str:
    """The whole page, in MyST markdown."""
    from neta_jupyter.runtime.settings import NetaSettings
    from neta_jupyter.server.app import NetaApp

    runs = class_section(
        NetaSettings,
        "NetaApp",
        "Settings of runs",
        "Read by the Jupyter server with the extension and by `neta-jupyter run` from the same "
        "files (`jupyter_server_config.py` or `.json`, `jupyter_config`, "
        "`jupyter_neta_jupyter_config` in the Jupyter config path, `jupyter --paths`). They are "
        "defined on `NetaSettings`, which `NetaApp` extends, so they are set as `c.NetaApp.…`.",
    )
    server = class_section(
        NetaApp,
        "NetaApp",
        "Settings of the server",
        "The server's own: `neta-jupyter run` ignores them.",
    )
    head = (
        "# Configuration reference\n\n"
        "Generated when the documentation is built, from the traits of `NetaSettings` and "
        "`NetaApp` (their type, default and help text), so it cannot fall behind the code. Set "
        'them in `jupyter_server_config.py` (`c.NetaApp.model = "openai:gpt-4.1-mini"`) or on '
        "the command line (`jupyter lab --NetaApp.max_steps=8`). How the configuration is read "
        "and what the main settings do: [Configuration](../configuration.md).\n"
    )
    return "\n".join([head, runs, server])
