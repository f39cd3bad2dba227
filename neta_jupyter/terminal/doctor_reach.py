"""What ``neta-jupyter doctor`` reaches out to: model endpoints and MCP servers.

An endpoint counts as reachable when it answers HTTP at all (a model server answers its model
list, or at least an error); its key is sent to it, as a run would, only to learn whether it is
refused. Keys are named by their variable, never shown.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx
from jupyter_core.paths import jupyter_config_dir

from ..events.redact import Redactor
from ..mcp import build as build_mcp
from ..providers.anthropic import ANTHROPIC_BASE_URL, ANTHROPIC_VERSION
from ..providers.config import Endpoint, builtin_endpoints, parse_endpoints
from ..providers.openai_compat import OPENAI_BASE_URL
from ..runtime.settings import NetaSettings

Level = Literal["ok", "note", "problem"]
PROBE_TIMEOUT = 5.0


@dataclass(frozen=True, slots=True)
class Finding:
    """One line of the report."""

    level: Level
    subject: str
    said: str
    fix: str = ""

    @classmethod
    def ok(cls, subject: str, said: str) -> Finding:
        """All is well."""
        return cls("ok", subject, said)

    @classmethod
    def note(cls, subject: str, said: str, fix: str) -> Finding:
        """Worth knowing; nothing configured here suffers from it."""
        return cls("note", subject, said, fix)

    @classmethod
    def problem(cls, subject: str, said: str, fix: str) -> Finding:
        """Something configured here does not work until fixed."""
        return cls("problem", subject, said, fix)

    @property
    def is_problem(self) -> bool:
        """Whether it makes the exit status 1."""
        return self.level == "problem"

    def line(self) -> str:
        """``<level> <subject>: <said> -> fix: <fix>``."""
        fix = f" -> fix: {self.fix}" if self.fix else ""
        return f"{self.level:<8}{self.subject}: {self.said}{fix}"


# --- model endpoints


def endpoint_findings(model: str, configured: dict[str, Any]) -> list[Finding]:
    """Each endpoint of ``c.NetaApp.endpoints``, and the built-in one the default model names."""
    try:
        endpoints = parse_endpoints(configured)
    except ValueError as exc:
        return [Finding.problem("endpoints", str(exc), "correct c.NetaApp.endpoints")]
    prefix = model.partition(":")[0] if ":" in model else ""
    builtin = builtin_endpoints()
    if prefix in builtin and prefix not in endpoints:
        endpoints[prefix] = builtin[prefix]
    return [_endpoint(endpoint) for endpoint in endpoints.values()]


def _endpoint(endpoint: Endpoint) -> Finding:
    subject = f"endpoint {endpoint.name}"
    url = _base_url(endpoint)
    variable = endpoint.api_key_env
    key = os.environ.get(variable, "") if variable else ""
    if variable and not key:
        return Finding.problem(
            subject,
            f"its key variable {variable} is not set",
            f"export {variable}=<the key of {url}> in the environment the server starts in",
        )
    probe = url.rstrip("/") + ("/v1/models" if endpoint.kind == "anthropic" else "/models")
    try:
        with httpx.Client(timeout=PROBE_TIMEOUT) as http:
            answer = http.get(probe, headers=_auth(endpoint, key))
    except httpx.HTTPError as exc:
        return Finding.problem(
            subject,
            f"{url} is unreachable ({type(exc).__name__}: {exc})",
            f"start the model server at {url}, or correct base_url of {endpoint.name!r} in "
            "c.NetaApp.endpoints",
        )
    if answer.status_code in (401, 403) and variable:
        return Finding.problem(
            subject,
            f"{url} refuses the key in {variable} (HTTP {answer.status_code})",
            f"put a valid key in {variable}",
        )
    with_key = f", key from {variable}" if variable else ", no key"
    return Finding.ok(subject, f"{url} answers (HTTP {answer.status_code}{with_key})")


def _base_url(endpoint: Endpoint) -> str:
    if endpoint.base_url:
        return endpoint.base_url
    if endpoint.kind == "anthropic":
        return os.environ.get("ANTHROPIC_BASE_URL") or ANTHROPIC_BASE_URL
    return os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL


def _auth(endpoint: Endpoint, key: str) -> dict[str, str]:
    if not key:
        return {}
    if endpoint.kind == "anthropic":
        return {"x-api-key": key, "anthropic-version": ANTHROPIC_VERSION}
    return {"Authorization": f"Bearer {key}"}


# --- MCP servers


async def mcp_findings(settings: NetaSettings) -> list[Finding]:
    """Each configured MCP server, started (then stopped) as a run would start it."""
    quiet = logging.getLogger("neta_jupyter.doctor")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    fleet = build_mcp(
        settings.mcp_servers,
        Path(jupyter_config_dir()),
        redactor=Redactor(),
        logger=quiet,
        start_timeout=settings.mcp_start_timeout,
        call_timeout=None,
    )
    found = [Finding.problem("mcp", p, "correct mcp.json") for p in fleet.problems]
    try:
        for server in fleet.servers:
            subject = f"mcp server {server.name}"
            if server.state == "invalid":
                fix = "correct its entry in mcp.json or c.NetaApp.mcp_servers"
                found.append(Finding.problem(subject, server.error or "invalid", fix))
                continue
            if server.state == "disabled":
                found.append(Finding.note(subject, "disabled", ""))
                continue
            await server.start()
            if server.state == "ready":
                found.append(Finding.ok(subject, f"starts, {len(server.tools)} tools"))
            else:
                said = f"does not start: {server.error}"
                fix = "check its command (or url) in mcp.json or c.NetaApp.mcp_servers"
                found.append(Finding.problem(subject, said, fix))
    finally:
        await fleet.aclose()
    return found
