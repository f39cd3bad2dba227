"""A crew as an HTML board: where the board widget's module is not built, and in saved outputs.

Everything shown comes from agents or files, so every value is escaped.
"""

from __future__ import annotations

import html
from typing import Any

_COLOURS = {
    "completed": "#1a7f37",
    "failed": "#cf222e",
    "running": "#0969da",
    "retrying": "#bf8700",
    "waiting_approval": "#8250df",
    "skipped": "#57606a",
}


def board_html(
    name: str,
    status: str,
    message: str | None,
    error: str | None,
    tasks: list[dict[str, Any]],
    waiting: list[dict[str, Any]],
    log: list[str],
) -> str:
    """The crew's head, its tasks' table, what it waits for and its latest log lines."""
    e = html.escape
    head = f"<b>crew {e(name)}</b> · {e(status)}"
    if message:
        head += f" · {e(message)}"
    if error:
        head += f" · <span style='color:#cf222e'>{e(error)}</span>"
    rows = "".join(_row(task) for task in tasks)
    table = (
        "<table><tr><th>task</th><th>agent</th><th>status</th><th>attempt</th>"
        f"<th>tokens</th><th>run</th></tr>{rows}</table>"
    )
    waits = "".join(
        f"<li>{e(w['taskId'])}: {e(w['message'])} — "
        f"<code>await crew.decide({w['taskId']!r}, 'retry'|'skip'|'answer'|'stop')</code></li>"
        for w in waiting
    )
    lines = "<br>".join(e(line) for line in log)
    return (
        f"<div class='neta-crew' data-status='{e(status)}'>{head}{table}"
        + (f"<div>waiting for:<ul>{waits}</ul></div>" if waits else "")
        + f"<div style='font-family:monospace;font-size:90%'>{lines}</div></div>"
    )


def _row(task: dict[str, Any]) -> str:
    e = html.escape
    status = str(task.get("status"))
    colour = _COLOURS.get(status, "#57606a")
    tokens = (task.get("usage") or {}).get("totalTokens") or ""
    return (
        f"<tr data-task='{e(str(task['taskId']))}'><td>{e(str(task['taskId']))}</td>"
        f"<td>{e(str(task.get('agent', '')))}</td>"
        f"<td style='color:{colour}'>{e(status)}</td><td>{task.get('attempt') or ''}</td>"
        f"<td>{tokens}</td><td><code>{e(str(task.get('childRequestId') or ''))}</code></td></tr>"
    )
