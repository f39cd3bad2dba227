"""``neta-jupyter doctor``: whether this environment is ready for neta and its store sound.

One line per finding, each problem with its fix, then the store's report (:mod:`..store.doctor`).
The exit status is 1 when anything is a problem. What is checked, in the order printed:

* the server extension: enabled in the Jupyter config path and importable as a server loads it
  (jupyter_server's own extension machinery), and the run API of each running server;
* the versions of the Jupyter parts the widget and the extension need, against our requirements;
* the optional parts (:mod:`..extras`): present or not, and what that means here;
* each configured model endpoint: reachable, and its key variable set (named, never shown);
* each configured MCP server: started, and its tools listed (:mod:`.doctor_reach`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx
from jupyter_core.paths import jupyter_data_dir
from packaging.requirements import Requirement

from ..extras import COLLABORATION, PARTS, REDIS, OptionalPart, missing_module
from ..server.installation import extension_enabled, extension_load_error, running_servers
from ..store import doctor as store_doctor
from ..store.health import DB_NAME
from .config import ConfigError, load_config, settings_from
from .doctor_reach import Finding, endpoint_findings, mcp_findings

EXTENSION = "neta_jupyter"
VERSIONS = ("jupyter_server", "jupyterlab", "ipywidgets", "anywidget")
"""The parts whose versions decide whether the extension and the widget work."""


def add_command(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """``neta-jupyter doctor``."""
    doctor = commands.add_parser(
        "doctor",
        help="check the environment (extension, versions, optional parts, endpoints, MCP "
        "servers) and the store; salvage a damaged store",
        description="Check what neta needs: the server extension enabled and loadable, the "
        "versions of Jupyter's parts, the optional parts, each configured model endpoint (its "
        "address and its key variable) and MCP server, then the store's database file. One "
        "line per finding, with its fix; exit status 1 when something is wrong. With "
        "--salvage, only the store: move a damaged file aside (it is kept) and rebuild the "
        "store from every row that can still be read (stop the Jupyter server first).",
    )
    doctor.add_argument(
        "--data-dir",
        metavar="DIR",
        help="the server's data dir (default: c.NetaApp.data_dir, else <jupyter data dir>/neta)",
    )
    doctor.add_argument("--db", metavar="FILE", help="the database file, if not DIR/neta.sqlite3")
    doctor.add_argument("--config", metavar="FILE", help="one more config file, read last")
    doctor.add_argument(
        "--salvage", action="store_true", help="rebuild a damaged store from what can be read"
    )


def command(args: argparse.Namespace) -> int:
    """Run ``doctor``: 0 when nothing is wrong, 1 when something is, 2 when a salvage failed."""
    section: dict[str, Any] = {}
    findings: list[Finding] = []
    try:
        config, read = load_config(args.config)
        section = dict(config.get("NetaApp", {}))
        settings = settings_from(config, read)
    except ConfigError as exc:
        findings.append(Finding.problem("configuration", str(exc), "correct that file"))
        settings = None
    path = _store_path(args, section)
    if args.salvage:
        return store_doctor.examine(path, repair=True)
    findings += extension_findings()
    findings += version_findings()
    findings += part_findings(_store_url(section))
    if settings is not None:
        findings += endpoint_findings(settings.model, settings.endpoints)
        findings += asyncio.run(mcp_findings(settings))
    print("Environment:")
    for finding in findings:
        print(f"  {finding.line()}")
    print()
    store = store_doctor.examine(path, repair=False)
    return 1 if store or any(f.is_problem for f in findings) else 0


def _store_path(args: argparse.Namespace, section: dict[str, Any]) -> Path:
    data_dir = args.data_dir or section.get("data_dir") or Path(jupyter_data_dir()) / "neta"
    if args.db:
        return Path(args.db).expanduser()
    if section.get("db_path") and not args.data_dir:
        return Path(section["db_path"]).expanduser()
    return Path(data_dir).expanduser() / DB_NAME


def _store_url(section: dict[str, Any]) -> str:
    return str(section.get("store_url") or os.environ.get("NETA_STORE_URL", ""))


# --- the extension


def extension_findings() -> list[Finding]:
    """Enabled in the config path, loadable as a server loads it, and on each running server."""
    if not extension_enabled(EXTENSION):
        return [
            Finding.problem(
                "extension",
                f"{EXTENSION} is not enabled in any Jupyter config folder",
                f"jupyter server extension enable {EXTENSION}",
            )
        ]
    if (exc := extension_load_error(EXTENSION)) is not None:
        return [Finding.problem("extension", f"{EXTENSION} cannot load: {exc}", _REINSTALL)]
    return [Finding.ok("extension", f"{EXTENSION} is enabled and loads"), *_running_servers()]


_REINSTALL = "pip install --force-reinstall neta_jupyter"


def _running_servers() -> Iterable[Finding]:
    """Whether each running Jupyter server of this user answers the run API."""
    for server in running_servers():
        url = str(server.get("url", ""))
        token = server.get("token") or ""
        headers = {"Authorization": f"token {token}"} if token else {}
        try:
            answer = httpx.get(f"{url}neta/api/models", headers=headers, timeout=5)
        except httpx.HTTPError as exc:
            yield Finding.note("server", f"{url} does not answer ({exc})", "")
            continue
        if answer.status_code == 200:
            yield Finding.ok("server", f"{url} serves the run API")
        elif answer.status_code == 404:
            fix = "restart that server (extensions load when it starts)"
            yield Finding.problem("server", f"{url} runs without {EXTENSION}", fix)
        else:
            said = _message(answer)
            yield Finding.problem("server", f"{url}: the run API answers {said}", "see above")


def _message(answer: httpx.Response) -> str:
    try:
        body = answer.json()
    except ValueError:
        return f"HTTP {answer.status_code}"
    return f"{answer.status_code} {body.get('errCode', '')}: {body.get('message', '')}"


# --- versions and optional parts


def version_findings() -> list[Finding]:
    """The installed version of each part the widget and the extension need, against ours."""
    wanted: dict[str, Requirement] = {}
    for line in metadata.requires(EXTENSION) or []:
        declared = Requirement(line)
        if declared.marker is None:  # not an extra's
            wanted[_normal(declared.name)] = declared
    findings = []
    for name in VERSIONS:
        requirement = wanted.get(_normal(name))
        spec = f"{name}{requirement.specifier}" if requirement else name
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            findings.append(Finding.problem(name, "not installed", f"pip install '{spec}'"))
            continue
        if requirement is not None and not requirement.specifier.contains(version, True):
            said = f"{version} installed, neta needs {requirement.specifier}"
            findings.append(Finding.problem(name, said, f"pip install '{spec}'"))
        else:
            findings.append(Finding.ok(name, version))
    return findings


def _normal(name: str) -> str:
    return name.lower().replace("-", "_").replace(".", "_")


def part_findings(store_url: str) -> list[Finding]:
    """Each optional part: present or not, and whether this configuration needs it."""
    return [_part(part, store_url) for part in PARTS]


def _part(part: OptionalPart, store_url: str) -> Finding:
    missing = missing_module(part)
    if missing is None:
        if part is COLLABORATION and not extension_enabled("jupyter_server_ydoc"):
            said = f"installed, but its server extension is disabled: {part.without}"
            return Finding.problem(
                part.name, said, "jupyter server extension enable jupyter_server_ydoc"
            )
        return Finding.ok(part.name, f"installed: {part.gives}")
    said = f"{missing} is not installed: {part.without}"
    if part is REDIS and not store_url:
        return Finding.note(part.name, said, f"for Redis: {part.install}")
    return Finding.problem(part.name, said, part.install)
