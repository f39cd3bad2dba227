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
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import Field

from .registry import ToolContext, tool
from .values import ToolError

MAX_READ_BYTES = 200_000
DEFAULT_READ_BYTES = 10_000
"""Bytes one read shows unless asked for more: small enough to reach the model whole."""
MAX_SCAN_BYTES = 16 * 1024 * 1024
"""Bytes read to count a file's lines; a larger file's count says "or more"."""
MAX_LIST_ENTRIES = 500
EMPTY_FOLDER = "(empty directory)"
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


def rule_path(root: Path, path: str) -> str:
    """``path`` as permission rules see it: resolved under ``root``, links followed.

    Relative to the root, or absolute when it leads out of it: ``./secrets/k``,
    ``notes/../secrets/k``, the absolute path and a link into ``secrets`` all read ``secrets/k``.
    """
    base = root.resolve()
    try:
        candidate = (base / path).resolve()
    except (RuntimeError, ValueError, OSError):  # a link loop, a NUL: the tool refuses it
        return path
    if candidate == base:
        return "."
    if base in candidate.parents:
        return candidate.relative_to(base).as_posix()
    return candidate.as_posix()


async def rule_arguments(
    root: Path, arguments: dict[str, Any], names: tuple[str, ...]
) -> dict[str, Any]:
    """``arguments`` with the path arguments ``names`` as :func:`rule_path` has them."""
    paths = {n: v for n in names if isinstance(v := arguments.get(n), str)}
    if not paths:
        return arguments
    resolved = await _off_loop(lambda: {n: rule_path(root, v) for n, v in paths.items()}, "path")
    return {**arguments, **resolved}


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


@tool(readonly=True, paths=("path",))
async def read_file(
    ctx: ToolContext,
    path: Annotated[str, Field(description="file path relative to the notebook root")],
    offset: Annotated[int, Field(ge=1, description="first line to show (1 is the start)")] = 1,
    limit: Annotated[
        int | None, Field(ge=1, description="how many lines to show (default: as many as fit)")
    ] = None,
    max_bytes: Annotated[
        int, Field(ge=1, le=MAX_READ_BYTES, description="most bytes of the file to show")
    ] = DEFAULT_READ_BYTES,
) -> str:
    """Read a text file under the notebook root: notes, CSV, code, Markdown, JSON, settings.

    Use it to answer what a file says or contains, e.g. read_file(path="notes.txt"). The first
    line of the result says what is shown: the whole file, or which of its lines, with the
    file's total lines and bytes; read a long file's rest with offset (the first line to show)
    and limit (how many lines). For sums, counts or averages over a table, use python instead.
    Not for folders (list_files) or binary files.
    """
    ctx.report(f"Reading {path}")

    def read() -> tuple[bytes, int]:
        data = _read_regular(ctx.root_dir, path, MAX_SCAN_BYTES + 1)
        if len(data) <= MAX_SCAN_BYTES:
            return data, len(data)
        return data[:MAX_SCAN_BYTES], os.stat(resolve_inside(ctx.root_dir, path)).st_size

    data, size = await _off_loop(read, path)
    if b"\x00" in data[:4096]:
        raise ToolError(f"{path} looks like a binary file")
    window = FileWindow.of(data, size, offset, limit, max_bytes)
    header = window.header(path, table=_is_table(path, data))
    return f"{header}\n{window.text}" if window.text else header


def _is_table(path: str, data: bytes) -> bool:
    """A CSV or TSV file whose first line names its columns (text over numbers)."""
    delimiter = {".csv": ",", ".tsv": "\t"}.get(Path(path).suffix.lower())
    lines = data[:65536].decode("utf-8", errors="replace").splitlines()[:2]
    if delimiter is None or len(lines) < 2:
        return False
    names, first_row = (line.split(delimiter) for line in lines)

    def numeric(field: str) -> bool:
        try:
            float(field.strip().strip('"'))
        except ValueError:
            return False
        return True

    same_width = len(names) == len(first_row) > 1
    return same_width and not any(map(numeric, names)) and any(map(numeric, first_row))


@dataclass(frozen=True, slots=True)
class FileWindow:
    """The lines of a file one read shows, and what the file holds in all."""

    text: str
    first: int
    """Number of the first line shown (1-based)."""
    last: int
    """Number of the last line shown; ``first - 1`` when none is."""
    total_lines: int
    total_bytes: int
    cut: bool = False
    """The last line shown is cut short (a single line longer than the byte limit)."""
    counted: bool = True
    """False when the file is over :data:`MAX_SCAN_BYTES`: lines past that are not counted."""

    @classmethod
    def of(
        cls, data: bytes, size: int, offset: int, limit: int | None, max_bytes: int
    ) -> FileWindow:
        """Lines ``offset`` … of ``data`` (the file's first bytes), at most ``max_bytes``."""
        lines = data.split(b"\n")
        if lines[-1] == b"":
            lines.pop()  # the newline ends the last line; it does not start another
        if offset > max(len(lines), 1):
            raise ToolError(
                f"offset {offset} is past the end of the file, which has {len(lines)} lines"
            )
        chosen = lines[offset - 1 : offset - 1 + limit if limit else None]
        shown: list[bytes] = []
        used = 0
        for line in chosen:
            if used + len(line) + 1 > max_bytes:
                break
            shown.append(line)
            used += len(line) + 1
        cut = not shown and bool(chosen)
        if cut:
            shown = [chosen[0][:max_bytes]]
        last = offset + len(shown) - 1
        ended = not cut and (last < len(lines) or data.endswith(b"\n"))
        text = (b"\n".join(shown) + (b"\n" if shown and ended else b"")).decode(errors="replace")
        return cls(
            text=text,
            first=offset,
            last=last,
            total_lines=len(lines),
            total_bytes=size,
            cut=cut,
            counted=size <= len(data),
        )

    def header(self, path: str, table: bool = False) -> str:
        """What the text is, in one line: the model must not take a part for the whole.

        ``table``: the file is a table whose first line names the columns, so its rows are
        counted for the model too (small models miscount them, or try to sum them by eye).
        """
        lines = _count(self.total_lines, "line") + ("" if self.counted else " or more")
        size = _count(self.total_bytes, "byte")
        if self.total_bytes == 0:
            return f"{path} is empty (0 bytes)."
        if table and self.counted:
            rows = _count(self.total_lines - 1, "row")
            size += f"; a table: a header line and {rows}, for sums or counts use python"
        if self.first == 1 and self.last == self.total_lines and self.counted and not self.cut:
            return f"Contents of {path} ({lines}, {size}):"
        span = (
            f"line {self.first}" if self.last <= self.first else f"lines {self.first}-{self.last}"
        )
        out = f"Only {span} of {path}, which has {lines} ({size}) in all"
        if self.cut:
            out += (
                f"; line {self.last} is cut after {len(self.text.encode()):,} bytes (max_bytes "
                f"shows up to {MAX_READ_BYTES:,})"
            )
        hidden = []
        if self.first > 1:
            hidden.append(f"1-{self.first - 1}")
        if self.last < self.total_lines or not self.counted:
            hidden.append(f"{self.last + 1}-{self.total_lines if self.counted else 'end'}")
        if hidden:
            out += f". Lines {' and '.join(hidden)} are not shown"
        if self.last < self.total_lines or not self.counted:
            out += f": read on with read_file offset={self.last + 1} (and limit for fewer lines)"
        return out + ":"


def _count(number: int, word: str) -> str:
    return f"{number:,} {word}" + ("" if number == 1 else "s")


def _entry(entry: os.DirEntry[str], base: Path) -> tuple[str, str | int]:
    """One entry's name and its size in bytes, or what it is instead (a folder: no detail).

    Links that lead nowhere, in circles or out of the root are marked.
    """
    try:
        info = entry.stat()  # follows links
    except OSError as exc:
        broken = "link loop" if exc.errno == errno.ELOOP else "broken link"
        return entry.name, f"({broken})" if entry.is_symlink() else "(unreadable)"
    if entry.is_symlink():
        try:
            inside = Path(entry.path).resolve().is_relative_to(base)
        except (OSError, RuntimeError):
            inside = False
        if not inside:
            return entry.name, "(link outside the notebook root)"
    if stat.S_ISDIR(info.st_mode):
        return f"{entry.name}/", ""
    if (kind := _kind(info.st_mode)) is not None:
        return entry.name, f"({kind.removeprefix('a ')}, not readable)"
    return entry.name, info.st_size


LIST_NAME_WIDTH = 40
"""Names up to this long line up their sizes in one column; a longer one pushes its own along."""


def _aligned(entries: list[tuple[str, str | int]]) -> list[str]:
    """Listing lines in columns: names, then sizes (right-aligned) or what the entry is."""
    width = min(LIST_NAME_WIDTH, max((len(name) for name, _ in entries), default=0))
    sizes = [f"{detail:,}" for _, detail in entries if isinstance(detail, int)]
    digits = max((len(size) for size in sizes), default=0)
    lines = []
    for name, detail in entries:
        if detail == "":
            lines.append(name)
            continue
        shown = f"{detail:>{digits},} bytes" if isinstance(detail, int) else detail
        lines.append(f"{name:<{width}}  {shown}")
    return lines


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
    lines = _aligned([_entry(e, base) for e in entries[:MAX_LIST_ENTRIES]])
    if len(entries) > MAX_LIST_ENTRIES:
        lines.append(f"… and {len(entries) - MAX_LIST_ENTRIES} more")
    return lines or [EMPTY_FOLDER]


@tool(readonly=True, paths=("path",))
async def list_files(
    ctx: ToolContext,
    path: Annotated[str, Field(description="folder relative to the notebook root")] = ".",
) -> str:
    """List the files and folders in a folder under the notebook root, with their sizes.

    Use it to find out which files exist or how a file is named exactly. It does not show what
    is in a file: read_file does.
    """

    def listing() -> list[str]:
        return _listing(ctx.root_dir, resolve_inside(ctx.root_dir, path))

    lines = await _off_loop(listing, path)
    if not lines:
        raise ToolError(f"no such directory: {path}")
    header = _listing_header(path, lines)
    return header if lines == [EMPTY_FOLDER] else "\n".join([header, *lines])


def _listing_header(path: str, lines: list[str]) -> str:
    """What the listing is: the model must know a name from a line of the file."""
    where = "the notebook folder" if path.strip() in ("", ".", "./") else f"folder {path}"
    if lines == [EMPTY_FOLDER]:
        return f"Files in {where}: none, the folder is empty."
    more = lines[-1].removeprefix("… and ").removesuffix(" more") if lines[-1][0] == "…" else ""
    count = len(lines) - 1 + int(more) if more.isdigit() else len(lines)
    noun = "entry" if count == 1 else "entries"
    return f"Files in {where} ({count} {noun}; folders end with /):"
