"""Read-only file tools, confined to the server's root directory.

They touch the file system in a worker thread, under a time limit, and read regular files only:
a named pipe, a device or a socket could block a read forever (or never end), and the event loop
they would block serves the whole Jupyter server.
"""

from __future__ import annotations

import asyncio
import errno
import os
import stat
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, TypeVar

from pydantic import Field

from .registry import ToolContext, ToolError, tool

MAX_READ_BYTES = 200_000
MAX_LIST_ENTRIES = 500
FILE_TOOL_TIMEOUT = 10.0
"""Seconds a file tool may wait for the file system before it gives up (a hung network mount)."""

_T = TypeVar("_T")
# Their own threads: a read stuck in a hung mount must not take a worker Jupyter itself needs.
_WORKERS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="neta-files")
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_NOFOLLOW", 0)
"""Never wait in ``open`` (a pipe without a writer), never follow a link swapped in late."""


def resolve_inside(root: Path, path: str) -> Path:
    """``path`` under ``root``; escaping it (``..``, absolute, symlink) is refused."""
    base = root.resolve()
    try:
        candidate = (base / path).resolve()
    except RuntimeError as exc:  # pathlib's word for ELOOP
        raise ToolError(f"{path} is a symbolic link loop") from exc
    if candidate != base and base not in candidate.parents:
        raise ToolError(
            f"path {path!r} is outside the notebook root; only files under it can be read"
        )
    return candidate


async def _off_loop(function: Callable[[], _T], path: str) -> _T:
    """Run blocking file-system work in a thread, within :data:`FILE_TOOL_TIMEOUT`."""
    work = asyncio.get_running_loop().run_in_executor(_WORKERS, function)
    try:
        return await asyncio.wait_for(work, FILE_TOOL_TIMEOUT)
    except TimeoutError as exc:
        raise ToolError(
            f"{path}: the file system did not answer within {FILE_TOOL_TIMEOUT:g} s"
        ) from exc


def _kind(mode: int) -> str | None:
    """What a non-regular, non-directory file is, in words (None for regular files)."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"


def _refuse_special(path: str, mode: int) -> None:
    if (kind := _kind(mode)) is not None:
        raise ToolError(f"{path} is {kind}, not a regular file; only regular files can be read")


def _read_regular(root: Path, path: str, limit: int) -> bytes:
    """Up to ``limit`` bytes of a regular file under ``root`` (blocking: call it off the loop)."""
    target = resolve_inside(root, path)
    try:
        info = os.stat(target)
    except OSError as exc:
        raise _missing(root, path, exc) from None
    if stat.S_ISDIR(info.st_mode):
        raise ToolError(f"{path} is a directory; use list_files")
    _refuse_special(path, info.st_mode)
    try:
        fd = os.open(target, _OPEN_FLAGS)
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        # Checked again on what was opened: the file may have been swapped since the stat.
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ToolError(f"{path} changed while it was opened; it is no longer a regular file")
        with os.fdopen(fd, "rb", closefd=False) as file:
            return file.read(limit)
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)


def _missing(root: Path, path: str, exc: OSError) -> ToolError:
    if exc.errno == errno.ELOOP:
        return ToolError(f"{path} is a symbolic link loop")
    if os.path.islink(root / path):
        return ToolError(f"{path} is a broken symbolic link (its target does not exist)")
    if isinstance(exc, FileNotFoundError):
        return ToolError(f"no such file: {path}")
    return ToolError(f"cannot read {path}: {exc.strerror or exc}")


@tool(readonly=True)
async def read_file(
    ctx: ToolContext,
    path: Annotated[str, Field(description="file path relative to the notebook root")],
    max_bytes: Annotated[int, Field(ge=1, le=MAX_READ_BYTES)] = 50_000,
) -> str:
    """Read a text file under the notebook root (the first max_bytes bytes)."""
    ctx.report(f"Reading {path}")
    data = await _off_loop(lambda: _read_regular(ctx.root_dir, path, max_bytes + 1), path)
    if b"\x00" in data[:4096]:
        raise ToolError(f"{path} looks like a binary file")
    text = data[:max_bytes].decode("utf-8", errors="replace")
    if len(data) > max_bytes:
        text += f"\n… [truncated after {max_bytes} bytes]"
    return text


def _entry_line(entry: os.DirEntry[str], base: Path) -> str:
    """One listing line; links that lead nowhere, in circles or out of the root are marked."""
    try:
        info = entry.stat()  # follows links
    except OSError as exc:
        broken = "link loop" if exc.errno == errno.ELOOP else "broken link"
        return f"{entry.name}\t({broken})" if entry.is_symlink() else f"{entry.name}\t(unreadable)"
    if entry.is_symlink():
        try:
            inside = Path(entry.path).resolve().is_relative_to(base)
        except (OSError, RuntimeError):
            inside = False
        if not inside:
            return f"{entry.name}\t(link outside the notebook root)"
    if stat.S_ISDIR(info.st_mode):
        return f"{entry.name}/"
    if (kind := _kind(info.st_mode)) is not None:
        return f"{entry.name}\t({kind.removeprefix('a ')}, not readable)"
    return f"{entry.name}\t{info.st_size} bytes"


def _listing(root: Path, target: Path) -> list[str]:
    """The lines of a listing (blocking: call it off the event loop)."""
    if not target.is_dir():
        return []
    with os.scandir(target) as scan:
        entries = [e for e in scan if not e.name.startswith(".")]

    def is_dir(entry: os.DirEntry[str]) -> bool:
        try:
            return entry.is_dir()
        except OSError:
            return False

    entries.sort(key=lambda e: (not is_dir(e), e.name.lower()))
    base = root.resolve()
    lines = [_entry_line(e, base) for e in entries[:MAX_LIST_ENTRIES]]
    if len(entries) > MAX_LIST_ENTRIES:
        lines.append(f"… and {len(entries) - MAX_LIST_ENTRIES} more")
    return lines or ["(empty directory)"]


@tool(readonly=True)
async def list_files(
    ctx: ToolContext,
    path: Annotated[str, Field(description="directory relative to the notebook root")] = ".",
) -> str:
    """List a directory under the notebook root: one entry a line, directories end with '/'."""

    def listing() -> list[str]:
        return _listing(ctx.root_dir, resolve_inside(ctx.root_dir, path))

    lines = await _off_loop(listing, path)
    if not lines:
        raise ToolError(f"no such directory: {path}")
    return "\n".join(lines)
