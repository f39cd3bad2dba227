"""MCP server entries: the ``mcpServers`` shape of ``mcp.json`` and ``c.NetaApp.mcp_servers``.

A stdio server is ``{command, args, env, cwd}``, a streamable-HTTP server ``{url, headers}``.
``${VAR}`` anywhere in a value is replaced by that environment variable; the values so resolved
are secrets (redacted by value wherever text leaves the process). One bad entry is reported with
its server and field, and never keeps the others from loading.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
CONFIG_FILE = "mcp.json"
MAX_SERVER_NAME = 40


class StdioServer(BaseModel):
    """A server neta starts as a subprocess and talks to over its stdin and stdout."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["stdio"] = "stdio"
    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    timeout: float | None = Field(default=None, gt=0)
    """Seconds one call may take (default: ``c.NetaApp.mcp_call_timeout``)."""
    startup: bool = False
    """Started with the Jupyter server (else when a run first may use its tools)."""
    start_timeout: float | None = Field(default=None, gt=0, alias="startTimeout")
    """Seconds a start may take (default: ``c.NetaApp.mcp_start_timeout``)."""


class HttpServer(BaseModel):
    """A server reached over streamable HTTP."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["http", "streamable-http", "streamableHttp"] = "http"
    url: str = Field(pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict)
    timeout: float | None = Field(default=None, gt=0)
    """Seconds one call may take (default: ``c.NetaApp.mcp_call_timeout``)."""
    startup: bool = False
    """Started with the Jupyter server (else when a run first may use its tools)."""
    start_timeout: float | None = Field(default=None, gt=0, alias="startTimeout")
    """Seconds a start may take (default: ``c.NetaApp.mcp_start_timeout``)."""


ServerSpec = StdioServer | HttpServer


@dataclass(frozen=True, slots=True)
class ServerEntry:
    """One configured server: its spec with references resolved, or why it cannot be used."""

    name: str
    spec: ServerSpec | None
    error: str | None = None
    secrets: tuple[str, ...] = ()
    disabled: bool = False
    """``"disabled": true``: listed, never started."""


@dataclass(slots=True)
class Entries:
    """Every configured server, in configuration order."""

    servers: list[ServerEntry] = field(default_factory=list)

    @property
    def secrets(self) -> list[str]:
        """The resolved values of every ``${VAR}`` reference."""
        return [s for entry in self.servers for s in entry.secrets]


def read_file(path: Path) -> tuple[dict[str, Any], str | None]:
    """The ``mcpServers`` object of ``path`` (empty when absent), or why it cannot be read."""
    if not path.exists():
        return {}, None
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return {}, f"{path}: not readable JSON ({exc})"
    servers = document.get("mcpServers", {}) if isinstance(document, dict) else None
    if not isinstance(servers, dict):
        return {}, f"{path}: 'mcpServers' must be an object of server name → settings"
    return servers, None


def configured(
    traits: dict[str, Any], config_dir: Path, environ: dict[str, str] | None = None
) -> tuple[Entries, list[str]]:
    """The servers of ``mcp.json`` in ``config_dir``, with ``traits`` over them.

    ``traits`` is ``c.NetaApp.mcp_servers``. Also returned: the problems that belong to no one
    server (an unreadable file).
    """
    raw, problem = read_file(config_dir / CONFIG_FILE)
    chosen = dict(traits)
    if set(chosen) == {"mcpServers"}:  # the file's shape, pasted whole
        chosen = dict(chosen["mcpServers"])
    return parse({**raw, **chosen}, environ), [problem] if problem else []


def parse(raw: dict[str, Any], environ: dict[str, str] | None = None) -> Entries:
    """Each entry of ``raw`` (name → settings) checked and resolved on its own."""
    env = dict(os.environ) if environ is None else environ
    return Entries([_entry(str(name), value, env) for name, value in raw.items()])


def _entry(name: str, value: Any, env: dict[str, str]) -> ServerEntry:
    if not _NAME.match(name) or "__" in name:
        why = "the name may hold only letters, digits, '-' and single '_'"
        return ServerEntry(name, None, f"MCP server {name!r}: {why}")
    if len(name) > MAX_SERVER_NAME:
        # Its tools' names begin with it, and a model sees at most 64 characters of them.
        why = f"the name may be at most {MAX_SERVER_NAME} characters long"
        return ServerEntry(name, None, f"MCP server {name!r}: {why}")
    if not isinstance(value, dict):
        return ServerEntry(name, None, f"MCP server {name!r}: settings must be an object")
    settings = {k: v for k, v in value.items() if k not in ("disabled", "description")}
    kind: type[ServerSpec] = HttpServer if "url" in settings else StdioServer
    if "url" not in settings and "command" not in settings:
        why = "needs 'command' (a stdio server) or 'url' (a streamable-HTTP server)"
        return ServerEntry(name, None, f"MCP server {name!r}: {why}")
    try:
        spec = kind.model_validate(settings)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(p) for p in problem["loc"]) or "settings"
        return ServerEntry(name, None, f"MCP server {name!r}: field {where!r}: {problem['msg']}")
    try:
        resolved, secrets = _resolve(spec, env)
    except _Unset as unset:
        return ServerEntry(
            name,
            None,
            f"MCP server {name!r}: field {unset.where!r}: environment variable "
            f"{unset.variable} is not set",
        )
    off = value.get("disabled") is True
    return ServerEntry(name, resolved, secrets=tuple(secrets), disabled=off)


class _Unset(Exception):
    def __init__(self, where: str, variable: str) -> None:
        super().__init__(variable)
        self.where = where
        self.variable = variable


def _resolve(spec: ServerSpec, env: dict[str, str]) -> tuple[ServerSpec, list[str]]:
    """The spec with every ``${VAR}`` replaced; the values used are the secrets."""
    secrets: list[str] = []

    def sub(where: str, text: str) -> str:
        def one(match: re.Match[str]) -> str:
            variable = match.group(1)
            if variable not in env:
                raise _Unset(where, variable)
            secrets.append(env[variable])
            return env[variable]

        return _REFERENCE.sub(one, text)

    if isinstance(spec, StdioServer):
        resolved: ServerSpec = spec.model_copy(
            update={
                "command": sub("command", spec.command),
                "args": [sub(f"args.{i}", a) for i, a in enumerate(spec.args)],
                "env": {k: sub(f"env.{k}", v) for k, v in spec.env.items()},
                "cwd": sub("cwd", spec.cwd) if spec.cwd is not None else None,
            }
        )
    else:
        resolved = spec.model_copy(
            update={
                "url": sub("url", spec.url),
                "headers": {k: sub(f"headers.{k}", v) for k, v in spec.headers.items()},
            }
        )
    return resolved, secrets
