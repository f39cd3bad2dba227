"""What the terminal client shows of a tool: the MCP server it comes from, the notebook edit it made."""

from __future__ import annotations

import asyncio
import io
import json
import re

from rich.console import Console

from neta_jupyter.cli_render import TerminalRenderer
from neta_jupyter.events import PermissionAskData
from neta_jupyter.terminal.live import LiveRenderer
from neta_jupyter.terminal.prompts import TerminalAsker
from neta_jupyter.terminal.text import ToolLabel

ARGS = '{"table": "sales", "limit": 5}'
TOOL = "warehouse__run_query"


def envelope(seq: int, event_type: str, **data: object) -> str:
    """One envelope of run ``r_1``."""
    return json.dumps({"eventType": event_type, "seq": seq, "requestId": "r_1", "data": data})


MCP = {"mcpServer": "warehouse", "mcpTool": "run_query"}


def mcp_call() -> list[str]:
    """An MCP tool's call: asked for, approved, completed."""
    tool = {"type": "tool", "toolCallId": "c1", "toolName": TOOL}
    ask = {"askId": "a1", "toolName": TOOL, "toolCallId": "c1", "arguments": ARGS, **MCP}
    return [
        envelope(0, "TOOL_START", **tool, **MCP, arguments=ARGS),
        envelope(1, "PERMISSION_ASK", type="permission_ask", **ask),
        envelope(
            2, "PERMISSION_ASK_RESOLVED", type="permission_ask_resolved", askId="a1", approved=True
        ),
        envelope(3, "TOOL_COMPLETED", **tool, output="5 rows", durationMs=12),
    ]


def test_only_a_tool_the_events_say_is_an_mcp_servers_names_a_server() -> None:
    assert ToolLabel().seen("my__helper").words() == "my__helper"  # neta's own
    assert ToolLabel().seen(TOOL).words() == TOOL  # an old log's call, which says no server
    cut = ToolLabel().seen("docs__search_every_page_1a2b3c4d", "docs", "search_every_page.v2")
    assert cut.words() == "search_every_page.v2 from docs"  # its own name, not the one cut
    assert cut.seen("docs__search_every_page_1a2b3c4d").words() == cut.words()  # later events
    assert cut.ask_words() == "search_every_page.v2 from the MCP server docs"


def test_the_plain_log_names_the_server_and_shows_the_arguments_asked_for() -> None:
    out = io.StringIO()
    renderer = TerminalRenderer(out, color=False)
    for payload in mcp_call():
        renderer.feed(payload)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("▸ run_query from warehouse {")
    assert lines[1] == "? run_query from the MCP server warehouse needs approval"
    assert lines[2] == '  arguments: {"table": "sales", "limit": 5}'
    assert "✓ run_query from warehouse (12 ms)" in lines


def test_the_live_display_names_the_server_on_the_approval_and_the_result() -> None:
    out = io.StringIO()
    console = Console(file=out, width=100, height=40, force_terminal=True, color_system=None)
    renderer = LiveRenderer(out, console=console)
    for payload in mcp_call():
        renderer.feed(payload)
    renderer.close()
    shown = out.getvalue()
    assert "? run_query from the MCP server warehouse needs approval" in shown
    assert "table: sales" in shown and "limit: 5" in shown
    assert "✓ run_query from warehouse (12 ms)" in shown


class Surface:
    """Where the asker writes its question (the renderer, in the CLI)."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def notice(self, text: str) -> None:
        self.prompts.append(text)

    def prompt(self, text: str) -> None:
        self.prompts.append(text)

    def answered(self) -> None:
        """Nothing to track."""


class Typed(io.StringIO):
    """A terminal's stdin where the user has typed an answer."""

    def isatty(self) -> bool:
        return True


def test_the_question_names_server_tool_and_arguments() -> None:
    surface = Surface()
    asker = TerminalAsker(surface, Typed("y\n"), assume_yes=False)
    ask = PermissionAskData(
        ask_id="a1",
        tool_name=TOOL,
        tool_call_id="c1",
        arguments=ARGS,
        mcp_server="warehouse",
        mcp_tool="run_query",
    )
    decision = asyncio.run(asker.permission(ask))
    assert decision.approved
    assert surface.prompts == [
        'Allow run_query from the MCP server warehouse {"table": "sales", "limit": 5}? '
        "[y]es / [a]lways / [n]o: "
    ]


DIFF = "--- cell ab12 (before)\n+++ cell ab12 (after)\n@@ -1 +1 @@\n-df.head()\n+df.describe()\n"


def notebook_edit() -> list[str]:
    """An edit_cell call that applied an edit."""
    tool = {"type": "tool", "toolCallId": "c1", "toolName": "edit_cell"}
    payload = {"editId": "ed_1", "path": "a.ipynb", "cellId": "ab12", "kind": "edit", "diff": DIFF}
    side = {"type": "tool_side", "toolCallId": "c1", "toolName": "edit_cell"}
    message = "edit of cell ab12 in a.ipynb"
    return [
        envelope(0, "TOOL_START", **tool, arguments='{"cell_id": "ab12"}'),
        envelope(
            1, "TOOL_EVENT", **side, category="notebook_edit", userMessage=message, payload=payload
        ),
        envelope(2, "TOOL_COMPLETED", **tool, output="edited"),
    ]


def test_the_plain_log_shows_a_notebook_edit_as_a_coloured_diff() -> None:
    out = io.StringIO()
    renderer = TerminalRenderer(out, color=True)
    for payload in notebook_edit():
        renderer.feed(payload)
    text = out.getvalue()
    assert "✎ edit of cell ab12 in a.ipynb" in text
    assert "\x1b[31m-df.head()\x1b[0m" in text
    assert "\x1b[32m+df.describe()\x1b[0m" in text


def test_the_live_display_shows_a_notebook_edit_as_a_coloured_diff() -> None:
    out = io.StringIO()
    console = Console(file=out, width=100, height=40, force_terminal=True, color_system="truecolor")
    renderer = LiveRenderer(out, console=console)
    for payload in notebook_edit():
        renderer.feed(payload)
    renderer.close()
    shown = out.getvalue()
    plain = re.sub(r"\x1b\[[0-9;]*m", "", shown)
    assert "✎ edit of cell ab12 in a.ipynb" in plain
    assert "-df.head()" in plain and "+df.describe()" in plain
    removed = shown[shown.index("df.head") - 40 : shown.index("df.head")]
    added = shown[shown.index("df.describe") - 40 : shown.index("df.describe")]
    assert "\x1b[" in removed and "\x1b[" in added
    assert removed[removed.rindex("\x1b[") :] != added[added.rindex("\x1b[") :], (
        "- and + in one colour"
    )


def edit_ask(preview: dict[str, object]) -> list[str]:
    """A notebook tool asking for approval, with what it would do."""
    tool = {"type": "tool", "toolCallId": "c1", "toolName": "edit_cell"}
    ask = {"askId": "a1", "toolName": "edit_cell", "toolCallId": "c1", "arguments": "{}"}
    return [
        envelope(0, "TOOL_START", **tool, arguments='{"cell_id": "ab12"}'),
        envelope(1, "PERMISSION_ASK", type="permission_ask", **ask, preview=preview),
    ]


def test_the_plain_log_shows_what_a_notebook_tool_asks_to_do() -> None:
    out = io.StringIO()
    renderer = TerminalRenderer(out, color=False)
    for payload in edit_ask({"kind": "diff", "text": DIFF, "cellId": "ab12", "stale": True}):
        renderer.feed(payload)
    text = out.getvalue()
    assert "the cell changed since the agent read it: this edit will be refused" in text
    assert "    -df.head()\n    +df.describe()\n" in text
    assert "arguments:" not in text
    out = io.StringIO()
    renderer = TerminalRenderer(out, color=False)
    for payload in edit_ask({"kind": "code", "text": "df.plot()\nplt.show()", "cellId": "cd34"}):
        renderer.feed(payload)
    assert "    │ df.plot()\n    │ plt.show()\n" in out.getvalue()


def test_the_live_display_shows_what_a_notebook_tool_asks_to_do() -> None:
    out = io.StringIO()
    console = Console(file=out, width=100, height=40, force_terminal=True, color_system=None)
    renderer = LiveRenderer(out, console=console)
    for payload in edit_ask({"kind": "diff", "text": DIFF, "cellId": "ab12"}):
        renderer.feed(payload)
    renderer.close()
    shown = out.getvalue()
    assert "? edit_cell needs approval" in shown
    assert "-df.head()" in shown and "+df.describe()" in shown
    assert "will be refused" not in shown


def ended(data: dict[str, object]) -> str:
    """The plain log's last line for a run that ends with ``data``."""
    out = io.StringIO()
    renderer = TerminalRenderer(out, color=False)
    kind = "MESSAGE_COMPLETED" if "finishReason" in data else "MESSAGE_FAILED"
    renderer.feed(envelope(0, kind, type="message", **data))
    return out.getvalue().splitlines()[-1]


def test_the_end_of_a_run_is_said_in_words_not_codes() -> None:
    assert ended({"finishReason": "STOP"}) == "■ completed"
    assert ended({"finishReason": "MAX_STEPS", "finishMessage": "8 steps"}) == (
        "■ completed (stopped at the step limit: 8 steps)"
    )
    stop = {"errorCode": "USER_CANCELLED", "errorMessage": "the run was cancelled"}
    assert ended(stop) == "■ stopped"
    supersede = {**stop, "errorMessage": "superseded by a new prompt in the same session"}
    assert ended(supersede) == "■ stopped: superseded by a new prompt in the same session"
    failed = {"errorCode": "LLM_ERROR", "errorMessage": "model call failed"}
    assert ended(failed) == "✗ run failed [LLM_ERROR]: model call failed"
