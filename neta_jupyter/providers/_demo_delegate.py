"""The demo model's sub-agents: one per file when a prompt asks about several files each on its own.

The prompt's files go to a sub-agent each (``delegate``); the answer compares what they found.
"""

from __future__ import annotations

import re
from typing import Any

_PARTS = re.compile(
    r"\b(?:compare\w*|comparison|each|every|separately|in parallel|side by side|one by one"
    r"|independent\w*|contrast)\b",
    re.I,
)
_SECTION = re.compile(r"^### \d+\. (?P<name>.+) \((?P<status>\w+), run (?P<run>[\w-]+)\)$")
_SIZE = re.compile(r"has ([\d,]+) lines? \(([\d,]+) bytes?\)")


def delegation(plain: str, files: list[str]) -> tuple[dict[str, Any], str] | None:
    """The ``delegate`` call for a prompt that asks for independent parts, and its purpose."""
    if len(files) < 2 or not _PARTS.search(plain):
        return None
    tasks = [
        {"name": path, "task": f"Read `{path}` and summarise what it contains."} for path in files
    ]
    purpose = (
        f"hand each of the {len(files)} files to a sub-agent of its own, so they are read at "
        "the same time"
    )
    return {"tasks": tasks}, purpose


def findings(output: str) -> list[tuple[str, str, str]]:
    """(name, status, what it said) per sub-agent of a ``delegate`` result."""
    found: list[tuple[str, str, str]] = []
    body: list[str] = []
    for line in output.splitlines():
        if match := _SECTION.match(line):
            if found:
                found[-1] = (*found[-1][:2], _said(body))
            found.append((match["name"], match["status"], ""))
            body = []
        elif found:
            body.append(line)
    if found:
        found[-1] = (*found[-1][:2], _said(body))
    return found


def _said(body: list[str]) -> str:
    """The sub-agent's answer (after ``Answer:``) or its failure."""
    text = "\n".join(body)
    if "\nAnswer:\n" in f"\n{text}":
        return f"\n{text}".split("\nAnswer:\n", 1)[1].strip()
    return next((line for line in body if line.startswith("Failed")), "").strip()


def _first_shown_line(said: str) -> str | None:
    """The first line of the first fenced block of an answer (a file's opening line)."""
    lines = said.splitlines()
    for index, line in enumerate(lines[:-1]):
        if line.startswith("```") and (shown := lines[index + 1].strip().replace("`", "'")):
            return shown[:100] if not shown.startswith("```") else None
    return None


def facts(output: str) -> list[str]:
    """The answer's bullet points: each sub-agent's main findings, then how the parts compare."""
    parts = findings(output)
    out = [f"- I gave each part to a sub-agent of its own ({len(parts)} in all), side by side."]
    sizes: dict[str, int] = {}
    for name, status, said in parts:
        if status != "completed":
            out.append(f"- `{name}`: the sub-agent did not finish ({said or status}).")
            continue
        points = [line for line in said.splitlines() if line.startswith("- ")][:3]
        if first := _first_shown_line(said):
            points.append(f"- It begins: `{first}`")
        out.append(f"- `{name}`, as its sub-agent found:")
        out += [f"  {point}" for point in points] or ["  - (no findings)"]
        if size := _SIZE.search(said):
            sizes[name] = int(size[2].replace(",", ""))
    if len(sizes) >= 2:
        largest, smallest = max(sizes, key=sizes.__getitem__), min(sizes, key=sizes.__getitem__)
        out.append(
            f"- Compared: `{largest}` is the largest ({sizes[largest]:,} bytes), "
            f"`{smallest}` the smallest ({sizes[smallest]:,} bytes)."
        )
    return out
