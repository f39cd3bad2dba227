"""The project's notes for the model: ``AGENTS.md`` files and ``.neta/MEMO.md``.

They are read as ``read_file`` reads: only regular files that are under the root once links are
followed (a link to ``~/.ssh/id_rsa`` named ``AGENTS.md`` is not sent to the model), never
waiting on a pipe, at most :data:`MAX_NOTE_BYTES` of each; and, as every model request wants
them, from a cache that rereads a file only when its size or time changes. The file system is
touched off the event loop, which serves the whole Jupyter server.
"""

from __future__ import annotations

import asyncio
import os
import stat
from dataclasses import dataclass
from pathlib import Path

MAX_SECTION_CHARS = 8_000
"""Characters of one note shown to the model."""
MAX_NOTE_BYTES = 4 * MAX_SECTION_CHARS
"""Bytes read of one note (a character is at most four)."""
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_NOFOLLOW", 0)
_CACHE_SIZE = 256

_Key = tuple[int, int, int, int]
_cache: dict[Path, tuple[_Key, str]] = {}


@dataclass(frozen=True, slots=True)
class ProjectNotes:
    """What the system prompt shows of the project."""

    agents: str = ""
    """Every AGENTS.md from the root down to the notebook's folder, root first, each headed by
    its path."""
    memo: str = ""
    """``.neta/MEMO.md`` at the root."""


async def project_notes(root: Path, notebook_path: str | None) -> ProjectNotes:
    """The notes of the project a run works in (its notebook's folder chooses the AGENTS.md)."""
    return await asyncio.to_thread(_notes, root, notebook_path)


def _notes(root: Path, notebook_path: str | None) -> ProjectNotes:
    base = root.resolve()
    folder = _folder(base, notebook_path)
    chain = [folder, *[p for p in folder.parents if p == base or base in p.parents]]
    texts = []
    for directory in reversed(chain):
        if text := read_note(base, directory / "AGENTS.md"):
            texts.append(f"### {(directory / 'AGENTS.md').relative_to(base)}\n{text}")
    return ProjectNotes("\n\n".join(texts), read_note(base, base / ".neta" / "MEMO.md"))


def _folder(base: Path, notebook_path: str | None) -> Path:
    """The notebook's folder when it is under the root; else the root."""
    if not notebook_path:
        return base
    try:
        candidate = (base / notebook_path).resolve()
        folder = candidate if candidate.is_dir() else candidate.parent
    except (OSError, RuntimeError, ValueError):  # a NUL, a link loop
        return base
    return folder if folder == base or base in folder.parents else base


def read_note(base: Path, file: Path) -> str:
    """The start of ``file`` if it is a regular file under ``base`` once links are followed."""
    try:
        target = file.resolve()
        if base not in target.parents:
            return ""
        info = os.stat(target)
    except (OSError, RuntimeError, ValueError):
        return ""
    if not stat.S_ISREG(info.st_mode):
        return ""
    key = (info.st_ino, info.st_dev, info.st_size, info.st_mtime_ns)
    if (cached := _cache.get(target)) is not None and cached[0] == key:
        return cached[1]
    text = _read_start(target)
    if len(_cache) >= _CACHE_SIZE:
        _cache.pop(next(iter(_cache)))
    _cache[target] = (key, text)
    return text


def _read_start(target: Path) -> str:
    try:
        fd = os.open(target, _OPEN_FLAGS)
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped since the stat
            return ""
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(MAX_NOTE_BYTES)
    except OSError:
        return ""
    finally:
        os.close(fd)
    return data.decode("utf-8", errors="replace")[:MAX_SECTION_CHARS]
