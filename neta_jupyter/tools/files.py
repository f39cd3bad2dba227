"""Read-only file tools, confined to the server's root directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field

from .registry import ToolContext, ToolError, tool

MAX_READ_BYTES = 200_000
MAX_LIST_ENTRIES = 500


def resolve_inside(root: Path, path: str) -> Path:
    """``path`` under ``root``; escaping it (``..``, absolute, symlink) is refused."""
    base = root.resolve()
    candidate = (base / path).resolve()
    if candidate != base and base not in candidate.parents:
        raise ToolError(
            f"path {path!r} is outside the notebook root; only files under it can be read"
        )
    return candidate


@tool(readonly=True)
async def read_file(
    ctx: ToolContext,
    path: Annotated[str, Field(description="file path relative to the notebook root")],
    max_bytes: Annotated[int, Field(ge=1, le=MAX_READ_BYTES)] = 50_000,
) -> str:
    """Read a text file under the notebook root (the first max_bytes bytes)."""
    target = resolve_inside(ctx.root_dir, path)
    if not target.exists():
        raise ToolError(f"no such file: {path}")
    if target.is_dir():
        raise ToolError(f"{path} is a directory; use list_files")
    ctx.report(f"Reading {path}")
    with target.open("rb") as fh:
        data = fh.read(max_bytes + 1)
    if b"\x00" in data[:4096]:
        raise ToolError(f"{path} looks like a binary file")
    text = data[:max_bytes].decode("utf-8", errors="replace")
    if len(data) > max_bytes:
        text += f"\n… [truncated after {max_bytes} bytes]"
    return text


@tool(readonly=True)
async def list_files(
    ctx: ToolContext,
    path: Annotated[str, Field(description="directory relative to the notebook root")] = ".",
) -> str:
    """List a directory under the notebook root: one entry a line, directories end with '/'."""
    target = resolve_inside(ctx.root_dir, path)
    if not target.is_dir():
        raise ToolError(f"no such directory: {path}")
    entries = sorted(
        (p for p in target.iterdir() if not p.name.startswith(".")),
        key=lambda p: (not p.is_dir(), p.name.lower()),
    )
    lines = [
        f"{p.name}/" if p.is_dir() else f"{p.name}\t{p.stat().st_size} bytes"
        for p in entries[:MAX_LIST_ENTRIES]
    ]
    if len(entries) > MAX_LIST_ENTRIES:
        lines.append(f"… and {len(entries) - MAX_LIST_ENTRIES} more")
    return "\n".join(lines) if lines else "(empty directory)"
