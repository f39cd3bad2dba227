"""The context builder: what the model sees besides the conversation itself (seed 004).

System prompt, ``AGENTS.md`` files from the notebook's folder up to the root, the todo list,
available skills, a memo, a summary of the kernel's variables, the map of a notebook-bound run's
notebook; and read-time trimming of huge
tool outputs (the stored transcript keeps them whole).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ...providers.base import Image, Message
from ...store import Entry, SessionRecord
from .instructions import MAX_SECTION_CHARS, ProjectNotes

MAX_TOOL_OUTPUT_CHARS = 12_000


def todo_section(items: list[dict[str, Any]]) -> str:
    """The todo list as a checklist."""
    marks = {"completed": "[x]", "in_progress": "[~]", "pending": "[ ]"}
    return "\n".join(
        f"- {marks.get(i.get('status', ''), '[ ]')} {i.get('content', '')}" for i in items
    )


def system_prompt(
    base_prompt: str,
    *,
    notes: ProjectNotes,
    session: SessionRecord | None,
    skills: list[tuple[str, str]],
    kernel_summary: str | None,
    notebook_map: str | None = None,
) -> str:
    """The system prompt with every section that has content."""
    sections = [base_prompt]
    if notes.agents:
        sections.append(f"## Project instructions (AGENTS.md)\n{notes.agents}")
    if session is not None and session.todo:
        sections.append(
            f"## Todo list (keep it current with the todo tool)\n{todo_section(session.todo)}"
        )
    if skills:
        listed = "\n".join(f"- {name}: {description}" for name, description in skills)
        sections.append(f"## Skills (run with run_skill)\n{listed}")
    if notes.memo:
        sections.append(f"## Memo\n{notes.memo}")
    if kernel_summary:
        sections.append(f"## Variables in the user's kernel\n{kernel_summary[:MAX_SECTION_CHARS]}")
    if notebook_map:
        sections.append(f"## The user's notebook\n{notebook_map[:MAX_SECTION_CHARS]}")
    return "\n\n".join(sections)


def trimmed(text: str, limit: int = MAX_TOOL_OUTPUT_CHARS) -> str:
    """Head and tail of a huge tool output, with a note of what was left out.

    The note says how large the whole is: a model counting what it sees must not take the part
    for the whole.
    """
    if len(text) <= limit:
        return text
    head, tail = text[: limit * 3 // 4], text[-limit // 4 :]
    lines = text.count("\n") + 1
    note = (
        f"{len(text) - len(head) - len(tail):,} characters trimmed: the whole output has "
        f"{len(text):,} characters in {lines:,} lines, of which only the first {len(head):,} and "
        f"the last {len(tail):,} characters are shown here; ask for less at a time to see the "
        "rest (a file: read_file with offset and limit)"
    )
    return f"{head}\n… [{note}] …\n{tail}"


def messages(
    path: list[Entry],
    attached: Mapping[str, tuple[str, list[Image]]] | None = None,
    pictures: Mapping[str, tuple[str, list[Image]]] | None = None,
) -> list[Message]:
    """The conversation for the model, tool outputs trimmed at read time.

    ``attached``: by entry id, what user messages show of their attachments (text to add and
    images); ``pictures``: by entry id, what tool results show of the pictures their calls
    produced (a note to add and images).

    Tool-call arguments that are not a JSON object (a reply cut off mid-call) go out as ``{}``:
    servers parse the history they are sent and refuse the whole request otherwise (llama.cpp
    answers HTTP 500), and the call's result already tells the model what was wrong.

    A sub-agent's conversation starts below its ``subagent`` entry: what is above it is the
    conversation of the run that delegated, whose call for it has no result yet.
    """
    out = []
    below = max((i + 1 for i, e in enumerate(path) if e.role == "subagent"), default=0)
    for entry in path[below:]:
        message = Message.from_json(entry.message)
        if attached and entry.entry_id in attached:
            text, message.images = attached[entry.entry_id]
            message.content = f"{message.content}\n\n{text}" if text else message.content
        if message.role == "tool":
            message.content = trimmed(message.content)
            if pictures and entry.entry_id in pictures:
                note, message.images = pictures[entry.entry_id]
                message.content = f"{message.content}\n{note}" if note else message.content
        elif message.tool_calls:
            message.tool_calls = [
                replace(call, arguments=_json_object(call.arguments)) for call in message.tool_calls
            ]
        out.append(message)
    return out


def _json_object(arguments: str) -> str:
    """``arguments`` if it is a JSON object, else an empty one."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return "{}"
    return arguments if isinstance(value, dict) else "{}"
