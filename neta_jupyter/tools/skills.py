"""Skills: folders with a ``SKILL.md`` whose entry command runs as a subprocess.

Where skills are found (a project skill hides a built-in one of the same name)::

    <root>/.neta/skills/<name>/SKILL.md      the project's own
    neta_jupyter/skills/<name>/SKILL.md      shipped with the package

``SKILL.md`` starts with a small front matter::

    ---
    name: profile_data
    description: Profile a CSV or Parquet file
    entry: {python} profile.py
    timeout: 600
    env: HF_TOKEN
    ---

(``timeout`` in seconds; ``env`` names secret-looking environment variables the skill may see,
which are otherwise withheld.)

The entry runs with the skill folder as its working directory, in a process group of its own.
It reads its arguments as one JSON object on stdin (``NETA_ROOT_DIR`` names the notebook root)
and writes JSON lines on stdout::

    {"type": "progress", "stage": "load", "status": "running", "current": 1, "total": 4,
     "percent": 25, "message": "…", "payload": {…}}
    {"type": "result", "output": "markdown for the model", "files": ["relative/to/root.png"]}
    {"type": "error", "message": "why it could not be done"}
    {"type": "auth_required", "message": "set HF_TOKEN to a token of huggingface.co",
     "variable": "HF_TOKEN"}

Other stdout lines are the skill's output as it runs: the user sees them live in the tool card
(the model reads only the result). ``auth_required`` tells the user which credentials the skill
lacks. stderr is kept (its tail explains a crash). On timeout or
cancellation the whole process group gets SIGTERM, then SIGKILL after a grace period.

Exceptions (who raises → who catches)::

    SkillFileError   raised by parse_skill_file, caught by discovery (the skill is skipped)
    ToolError        raised by run_skill (missing skill, crash, timeout), caught by the runtime
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import mimetypes
import os
import re
import shlex
import signal
import sys
from collections import deque
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, get_args

from .registry import ProcessLevel, ProcessSink, ProcessStatus, Tool, ToolContext, tool
from .values import ToolError, ToolFile, ToolResult

SKILL_FILE = "SKILL.md"
PROJECT_SKILLS = Path(".neta") / "skills"
DEFAULT_TIMEOUT = 600.0
KILL_GRACE = 2.0
"""Seconds between SIGTERM and SIGKILL of a skill's process group."""
STDERR_TAIL_LINES = 20
MAX_FILE_BYTES = 20_000_000

_STDERR_KEEP = 200
_LINE_CHARS = 1_000
_STDOUT_LIMIT = 16 * 1024 * 1024
_SECRET_ENV = re.compile(r"api[-_]?key|token|password|secret|authorization|credential", re.I)
"""Environment variables a skill does not see unless its ``env`` lists them."""
_STATUSES: frozenset[str] = frozenset(get_args(ProcessStatus))
_LEVELS: frozenset[str] = frozenset(get_args(ProcessLevel))


@dataclass(frozen=True, slots=True)
class Skill:
    """One skill found on disk."""

    name: str
    description: str
    entry: str
    """Command line; ``{python}`` is the server's interpreter."""
    folder: Path
    timeout: float = DEFAULT_TIMEOUT
    env: tuple[str, ...] = ()
    """Secret-looking environment variables the skill may nevertheless see."""
    builtin: bool = False
    instructions: str = field(default="", repr=False)
    """The body of ``SKILL.md`` after the front matter."""

    def argv(self) -> list[str]:
        """The entry as an argument vector."""
        return [part.replace("{python}", sys.executable) for part in shlex.split(self.entry)]


class SkillFileError(ValueError):
    """A ``SKILL.md`` without the fields a skill needs."""


# --- discovery -----------------------------------------------------------------------------


def parse_skill_file(path: Path, *, builtin: bool = False) -> Skill:
    """Read one ``SKILL.md``; the folder's name stands in for a missing ``name``."""
    text = path.read_text(encoding="utf-8")
    meta, body = _front_matter(text)
    entry = meta.get("entry", "").strip()
    if not entry:
        raise SkillFileError(f"{path}: the front matter has no 'entry'")
    try:
        timeout = float(meta.get("timeout") or DEFAULT_TIMEOUT)
    except ValueError as exc:
        raise SkillFileError(f"{path}: timeout must be a number of seconds") from exc
    description = meta.get("description") or next(
        (line.strip("# ").strip() for line in body.splitlines() if line.strip()), ""
    )
    return Skill(
        name=meta.get("name") or path.parent.name,
        description=description,
        entry=entry,
        folder=path.parent,
        timeout=timeout,
        env=tuple(v.strip() for v in meta.get("env", "").split(",") if v.strip()),
        builtin=builtin,
        instructions=body.strip(),
    )


def _front_matter(text: str) -> tuple[dict[str, str], str]:
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, text
    meta: dict[str, str] = {}
    for index, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            return meta, "\n".join(lines[index + 1 :])
        key, sep, value = line.partition(":")
        if sep and key.strip() and not line.startswith((" ", "\t", "#")):
            meta[key.strip().lower()] = value.strip().strip("\"'")
    return {}, text


@cache
def builtin_skills_dir() -> Path | None:
    """The package's skills folder (a real folder in any normal installation)."""
    folder = resources.files("neta_jupyter").joinpath("skills")
    return folder if isinstance(folder, Path) and folder.is_dir() else None


def discover_skills(root_dir: Path) -> dict[str, Skill]:
    """Every usable skill by name, project skills before built-in ones; broken ones skipped."""
    found = _scan(root_dir / PROJECT_SKILLS, builtin=False)
    for name, skill in builtin_skills().items():
        found.setdefault(name, skill)
    return found


def skill_catalogue(root_dir: Path) -> list[tuple[str, str]]:
    """(name, description) of every usable skill, for the system prompt."""
    return [(name, skill.description) for name, skill in sorted(discover_skills(root_dir).items())]


def builtin_skills() -> dict[str, Skill]:
    """The skills shipped with the package."""
    folder = builtin_skills_dir()
    return _scan(folder, builtin=True) if folder is not None else {}


def _scan(folder: Path, *, builtin: bool) -> dict[str, Skill]:
    found: dict[str, Skill] = {}
    for path in sorted(folder.glob(f"*/{SKILL_FILE}")) if folder.is_dir() else []:
        skill = _read(path, builtin)
        if skill is not None:
            found.setdefault(skill.name, skill)
    return found


_READ: dict[tuple[Path, bool], tuple[tuple[int, ...], Skill | None]] = {}
"""Each ``SKILL.md`` read so far (``None``: unusable), with the file's state when it was read.

Every model call lists the skills; reading and parsing every file each time held the event loop
about a millisecond per call. A file whose state changed is read again.
"""


def _read(path: Path, builtin: bool) -> Skill | None:
    try:
        info = path.stat()
    except OSError:
        return None
    state = (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
    known = _READ.get((path, builtin))
    if known is not None and known[0] == state:
        return known[1]
    try:
        skill: Skill | None = parse_skill_file(path, builtin=builtin)
    except (OSError, UnicodeDecodeError, SkillFileError):
        skill = None
    _READ[(path, builtin)] = (state, skill)
    return skill


def skills_summary(root_dir: Path) -> str:
    """One line per skill, for a system prompt or an error message."""
    return _listing(discover_skills(root_dir)) or "(no skills)"


def _listing(skills: dict[str, Skill]) -> str:
    return "\n".join(f"- {s.name}: {s.description}" for s in skills.values())


# --- the tool ------------------------------------------------------------------------------


@tool()
async def run_skill(ctx: ToolContext, name: str, args: dict[str, Any] | None = None) -> ToolResult:
    """Run a skill: a packaged program for a larger job that reports progress as it runs.

    Use a skill only for the job it is named for (profile_data: a statistical profile of a
    CSV or Parquet table). To read or summarise a file use read_file; to compute one value use
    python. `args` is a JSON object (paths relative to the notebook root). An unknown name
    fails with the list of skills (project ones live in .neta/skills/).
    """
    skills = discover_skills(ctx.root_dir)
    skill = skills.get(name)
    if skill is None:
        available = ", ".join(sorted(skills)) or "none"
        ctx.process.skill("missing", name, message=f"no skill named {name!r}")
        raise ToolError(f"no skill named {name!r}; available skills: {available}")
    ctx.process.skill("activated", skill.name, description=skill.description)
    try:
        return await SkillProcess(skill, ctx).run(args or {})
    finally:
        ctx.process.skill("deactivated", skill.name)


def _with_builtin_listing(t: Tool) -> Tool:
    """The tool, its description naming the built-in skills so the model knows them."""
    listing = _listing(builtin_skills())
    return replace(t, description=f"{t.description}\n\nBuilt-in:\n{listing}") if listing else t


run_skill = _with_builtin_listing(run_skill)


class SkillProcess:
    """One execution of a skill's entry, bridged to the tool call's process events."""

    def __init__(self, skill: Skill, ctx: ToolContext) -> None:
        self.skill = skill
        self._ctx = ctx
        self._sink: ProcessSink = ctx.process
        self._stderr: deque[str] = deque(maxlen=_STDERR_KEEP)
        self._result: dict[str, Any] | None = None
        self._error: str | None = None

    async def run(self, args: dict[str, Any]) -> ToolResult:
        """Start the entry, follow its stdout, and turn its result line into the tool result."""
        self._report("started", stage="start", message=f"starting skill {self.skill.name}")
        proc = await self._spawn()
        try:
            async with asyncio.timeout(self.skill.timeout):
                await self._communicate(proc, args)
        except TimeoutError:
            await _kill_group(proc)
            message = f"skill {self.skill.name} timed out after {self.skill.timeout:g} s"
            self._report("failed", level="error", message=message)
            raise ToolError(self._with_stderr(message)) from None
        except asyncio.CancelledError:
            await _kill_group(proc)
            self._report("cancelled", level="warning", message="cancelled; process group killed")
            raise
        finally:
            if proc.returncode is None:
                await _kill_group(proc)
        return self._finish(proc.returncode)

    async def _spawn(self) -> asyncio.subprocess.Process:
        try:
            return await asyncio.create_subprocess_exec(
                *self.skill.argv(),
                cwd=self.skill.folder,
                env=self._environment(),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                limit=_STDOUT_LIMIT,
            )
        except OSError as exc:
            raise ToolError(f"could not start skill {self.skill.name}: {exc}") from exc

    def _environment(self) -> dict[str, str]:
        env = {
            k: v for k, v in os.environ.items() if k in self.skill.env or not _SECRET_ENV.search(k)
        }
        env.update(
            NETA_ROOT_DIR=str(self._ctx.root_dir.resolve()),
            NETA_SKILL_DIR=str(self.skill.folder),
            NETA_SESSION_ID=self._ctx.session_id,
            PYTHONUNBUFFERED="1",
            PYTHONIOENCODING="utf-8",
        )
        return env

    async def _communicate(self, proc: asyncio.subprocess.Process, args: dict[str, Any]) -> None:
        assert proc.stdin is not None, "stdin is a pipe"
        assert proc.stdout is not None, "stdout is a pipe"
        assert proc.stderr is not None, "stderr is a pipe"
        stderr = asyncio.create_task(self._read_stderr(proc.stderr))
        try:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                proc.stdin.write(json.dumps(args).encode() + b"\n")
                await proc.stdin.drain()
                proc.stdin.close()
            async for raw in proc.stdout:
                self._on_line(raw.decode("utf-8", "replace").rstrip("\r\n"))
            await proc.wait()
            await stderr
        finally:
            stderr.cancel()

    async def _read_stderr(self, stream: asyncio.StreamReader) -> None:
        """Keep the last lines; read in chunks so one endless line cannot stall the pipe."""
        partial = ""
        while chunk := await stream.read(65536):
            lines = (partial + chunk.decode("utf-8", "replace")).split("\n")
            partial = _cut(lines.pop())
            self._stderr.extend(_cut(line.rstrip()) for line in lines)
        if partial.strip():
            self._stderr.append(partial.rstrip())

    def _on_line(self, line: str) -> None:
        message = _json_line(line)
        if message is None:
            if line.strip() and self._ctx.scope is not None:
                self._ctx.scope.stream(_cut(line) + "\n")
            return
        match message.get("type"):
            case "progress":
                self._progress(message)
            case "result":
                self._result = message
            case "error":
                self._error = str(message.get("message") or "the skill reported an error")
            case "auth_required" if self._ctx.scope is not None:
                variable = message.get("variable")
                self._ctx.scope.auth_required(
                    str(message.get("message") or f"skill {self.skill.name} needs credentials"),
                    {"skill": self.skill.name, "variable": str(variable)} if variable else None,
                )

    def _progress(self, message: dict[str, Any]) -> None:
        status = message.get("status")
        level = message.get("level")
        payload = message.get("payload")
        sub = message.get("operationId")
        self._sink.report(
            status=status if status in _STATUSES else "running",
            stage=_text(message.get("stage")),
            message=_text(message.get("message")),
            current=_number(message.get("current")),
            total=_number(message.get("total")),
            percent=_number(message.get("percent")),
            level=level if level in _LEVELS else "info",
            payload=payload if isinstance(payload, dict) else None,
            operation_id=f"{self._sink.operation_id}/{sub}" if sub else None,
            target_type="skill",
            source="skill",
        )

    def _finish(self, returncode: int | None) -> ToolResult:
        name = self.skill.name
        if self._error is not None:
            self._report("failed", level="error", message=self._error)
            raise ToolError(self._with_stderr(f"skill {name} failed: {self._error}"))
        if returncode != 0:
            message = f"skill {name} exited with code {returncode}"
            self._report("failed", level="error", message=message)
            raise ToolError(self._with_stderr(message))
        if self._result is None:
            message = f"skill {name} ended without a result line"
            self._report("failed", level="error", message=message)
            raise ToolError(self._with_stderr(message))
        result = ToolResult(str(self._result.get("output") or ""))
        for path in self._result.get("files") or []:
            file = self._read_file(str(path))
            (result.images if file.content_type.startswith("image/") else result.files).append(file)
        self._report("completed", stage="done", percent=100, message=f"skill {name} finished")
        return result

    def _read_file(self, relative: str) -> ToolFile:
        root = self._ctx.root_dir.resolve()
        path = (root / relative).resolve()
        if not path.is_relative_to(root) or not path.is_file():
            raise ToolError(f"skill {self.skill.name} named a file outside the root: {relative}")
        if path.stat().st_size > MAX_FILE_BYTES:
            raise ToolError(
                f"skill {self.skill.name} produced a file too large to attach: {relative}"
            )
        content_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        return ToolFile(path.name, path.read_bytes(), content_type)

    def _report(self, status: ProcessStatus, **fields: Any) -> None:
        self._sink.report(status=status, target_type="skill", source="skill", **fields)

    def _with_stderr(self, message: str) -> str:
        tail = list(self._stderr)[-STDERR_TAIL_LINES:]
        return (
            f"{message}\nstderr (last {len(tail)} lines):\n" + "\n".join(tail) if tail else message
        )


async def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM the skill's process group, SIGKILL it after a grace period (children too)."""
    pgid = proc.pid  # start_new_session: the entry leads its own group
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), KILL_GRACE)
    # Also after the leader is gone: its children may have ignored SIGTERM.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    await proc.wait()


def _json_line(line: str) -> dict[str, Any] | None:
    """A protocol message, or None for a line of plain output."""
    text = line.strip()
    if not text.startswith("{"):
        return None
    try:
        message = json.loads(text)
    except json.JSONDecodeError:
        return None
    return message if isinstance(message, dict) else None


def _cut(line: str) -> str:
    return line if len(line) <= _LINE_CHARS else line[:_LINE_CHARS] + " …"


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None
