"""``neta-jupyter run`` on a real pseudo-terminal, the embedded runtime's tools, kernel and config.

The live display is checked on what a user's terminal would show: the CLI runs on a pty (pexpect)
and its output goes through a VT100 emulator (pyte), so cursor moves and redraws are applied
and only the final screen is asserted on.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pyte
import pytest
from rich.console import Console

from neta_jupyter.cli_render import TerminalRenderer
from neta_jupyter.terminal.live import LiveRenderer
from tests.cli_helpers import cli, cli_env, embedded, script, workdir
from tests.provider_server import ProviderServer, Reply, serve

__all__ = ["workdir"]  # a fixture, imported for the tests below

ROWS, COLS = 300, 100
COLOUR = re.compile(r"\x1b\[[0-9;]*(?:3[0-9]|4[0-9]|9[0-7])(?:;[0-9;]*)?m")
"""An SGR sequence that sets a colour (bold and dim alone are not colours)."""
SPINNER = set("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")
"""The frames of the spinner on a running call's card."""

MARKDOWN_ANSWER = (
    "# Quarterly report\n\n"
    "Revenue grew **twelve percent**, see `notes.txt`; [bold red]not markup[/] stays as written."
    "\x1b]0;pwned\x07\x1b[2J\n\n"
    "| region | amount |\n|---|---|\n| north | 10 |\n\n"
    "```python\ntotal = sum([10, 20])\nprint(total)\n```\n\n"
    "1. first point\n2. second point\n"
)
ASK_READ_AND_ANSWER = {
    "turns": [
        {
            "toolCalls": [
                {
                    "name": "clarify",
                    "arguments": {"question": "Which region?", "options": ["north", "south"]},
                }
            ]
        },
        {
            "reasoning": "The user chose a region; read the notes next.",
            "toolCalls": [{"name": "read_file", "arguments": {"path": "a.txt"}}],
        },
        {"text": MARKDOWN_ANSWER},
    ]
}


class Terminal:
    """The CLI on a pseudo-terminal of ROWS by COLS, its screen kept by a VT100 emulator."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.child = pexpect.spawn(
            sys.executable,
            ["-m", "neta_jupyter.cli", *args],
            env={**cli_env(), "TERM": "xterm-256color", **(env or {})},
            dimensions=(ROWS, COLS),
            encoding="utf-8",
            timeout=60,
        )
        self.screen = pyte.Screen(COLS, ROWS)
        self.stream = pyte.Stream(self.screen)
        self.raw = ""

    def _take(self) -> None:
        text = self.child.before + (self.child.after if isinstance(self.child.after, str) else "")
        self.raw += text
        self.stream.feed(text)

    def expect(self, pattern: str) -> None:
        """Until ``pattern`` (a regex) was printed."""
        self.child.expect(pattern)
        self._take()

    def type(self, line: str) -> None:
        """Type a line and Enter."""
        self.child.sendline(line)

    def finish(self) -> int:
        """Until the command exits; its exit status."""
        self.child.expect(pexpect.EOF)
        self._take()
        self.child.close()
        status = self.child.exitstatus
        assert status is not None, f"killed by signal {self.child.signalstatus}"
        return int(status)

    @property
    def lines(self) -> list[str]:
        """The screen's lines as the user reads them."""
        return [line.rstrip() for line in self.screen.display]

    @property
    def text(self) -> str:
        """The screen as text."""
        return "\n".join(self.lines).strip()


def line_with(term: Terminal, text: str) -> str:
    """The one screen line containing ``text``."""
    found = [line for line in term.lines if text in line]
    assert len(found) == 1, f"{text!r} on {len(found)} lines of:\n{term.text}"
    return found[0]


def test_live_display_renders_markdown_panels_and_answers_the_asks(workdir: Path) -> None:
    model = script(workdir, ASK_READ_AND_ANSWER)
    term = Terminal(
        "run", *embedded(workdir, "report on a.txt", "--model", model, "--ask", "read_file")
    )
    term.expect(r"answer: ")
    assert "Which region?" in term.text and "1. north" in term.text
    term.type("2")
    term.expect(r"\[y\]es / \[a\]lways / \[n\]o: ")
    term.type("y")
    assert term.finish() == 0, term.text
    screen = term.text

    # The question was answered at the prompt and the answer went back to the model.
    assert line_with(term, "✓ clarify").startswith("╭─")
    assert "│ south" in screen
    # The permission ask is a panel, answered y at the prompt; then the call's own panel.
    assert line_with(term, "? read_file needs approval").startswith("╭─")
    assert re.search(
        r"Allow read_file \{\"path\": \"a.txt\"\}\? \[y\]es / \[a\]lways / \[n\]o: y", screen
    )
    assert "  approved" in screen
    assert line_with(term, "✓ read_file").startswith("╭─ ✓ read_file")
    assert re.search(r"│ alpha contents\s+│", screen)
    # Reasoning is collapsed to one line once done.
    assert line_with(term, "thinking: The user chose a region").startswith("thinking: ")

    # Markdown, rendered: no heading or emphasis markers, a table, the code without its fence.
    heading = line_with(term, "Quarterly report")
    assert "#" not in heading
    assert "Revenue grew twelve percent, see notes.txt;" in screen
    assert "**" not in screen and "```" not in screen and "`notes.txt`" not in screen
    assert re.search(r"region\s+amount", screen) and re.search(r"north\s+10", screen)
    assert "| north |" not in screen
    assert "total = sum([10, 20])" in screen and "print(total)" in screen
    assert "1 first point" in screen and "2 second point" in screen
    # The code is highlighted: its first name is drawn in a colour of its own.
    assert re.search(r"\x1b\[[0-9;]*38;5;[0-9]+[0-9;]*mtotal", term.raw)

    # Model text is shown, never obeyed: no markup, no terminal title, no screen clearing.
    assert "[bold red]not markup[/] stays as written." in screen
    assert "pwned" not in term.raw and "\x1b]0;" not in term.raw and "\x1b[2J" not in term.raw
    assert line_with(term, "■ completed").startswith("■ completed · tokens: ")


def test_python_runs_in_a_local_kernel_on_the_terminal(workdir: Path) -> None:
    term = Terminal("run", *embedded(workdir, "what is 17*23?"))
    term.expect(r"\[y\]es / \[a\]lways / \[n\]o: ")
    assert line_with(term, "? python needs approval").startswith("╭─")
    assert re.search(r"│ print\(17\*23\)\s+│", term.text)  # the code as code, not as JSON
    assert re.search(r"\x1b\[[0-9;]*38;5;[0-9]+[0-9;]*mprint", term.raw)  # highlighted
    term.type("y")
    assert term.finish() == 0, term.text
    # While the kernel starts and runs the code, its card is redrawn with a spinner.
    running = term.raw[term.raw.index("approved") :].split("✓ python")[0]
    assert "Running Python in your kernel" in running and "running python" in running
    assert set(running) & SPINNER
    # ... and that live card never stays on the screen: only the finished one does.
    assert "Running Python in your kernel" not in term.text and not set(term.text) & SPINNER
    assert line_with(term, "✓ python").startswith("╭─ ✓ python")
    assert re.search(r"│ 391\s+│", term.text)
    assert "17*23 = 391" in term.text and "works out to 391" in term.text


def test_plain_and_json_on_a_terminal(workdir: Path) -> None:
    plain = Terminal("run", *embedded(workdir, "what files are here?", "--yes", "--plain"))
    assert plain.finish() == 0, plain.text
    assert '▸ list_files {"path": "."}' in plain.text and "│ a.txt" in plain.text
    assert "╭" not in plain.raw  # no panels
    as_json = Terminal("run", *embedded(workdir, "what files are here?", "--yes", "--json"))
    assert as_json.finish() == 0, as_json.text
    events = [json.loads(line) for line in as_json.raw.splitlines() if line.strip()]
    assert events[0]["eventType"] == "SESSION_CREATED"
    assert events[-1]["eventType"] == "MESSAGE_COMPLETED"


def test_live_display_has_no_colour_with_no_color(workdir: Path) -> None:
    term = Terminal(
        "run", *embedded(workdir, "what files are here?", "--yes"), env={"NO_COLOR": "1"}
    )
    assert term.finish() == 0, term.text
    assert line_with(term, "✓ list_files").startswith("╭─")
    assert not COLOUR.search(term.raw)


def test_live_region_shows_progress_bars_and_tokens() -> None:
    def envelope(event_type: str, seq: int, **data: object) -> str:
        body = {"eventType": event_type, "seq": seq, "requestId": "r_1", "step": 2, "data": data}
        return json.dumps(body)

    out = io.StringIO()
    console = Console(file=out, width=80, height=40, force_terminal=True, color_system=None)
    renderer = LiveRenderer(out, console=console)
    renderer.feed(
        envelope(
            "TOKEN_USAGE",
            0,
            type="token_usage",
            inputTokens=1234,
            outputTokens=56,
            inputSource="provider",
            outputSource="provider",
            hasUnknownUsage=False,
            sessionInputTokens=1234,
            sessionOutputTokens=56,
        )
    )
    progress = {"type": "process", "operationId": "op", "stage": "profile", "message": "columns"}
    renderer.feed(envelope("PROCESS_EVENT", 1, status="running", current=3, total=4, **progress))
    view = Console(file=io.StringIO(), width=80, height=40, color_system=None)
    with view.capture() as shown:
        view.print(renderer.view())
    region = shown.get()
    renderer.close()
    # Three quarters of a 30-cell bar drawn, the rest left blank.
    assert re.search(r"profile ━{22}╸? {7,8} 75% columns", region), region
    assert "step 2" in region and "tokens 1,234 in / 56 out" in region
    renderer.feed(envelope("PROCESS_EVENT", 2, status="completed", **progress))
    renderer.close()
    assert "✓ profile completed: columns" in out.getvalue()


def test_the_status_line_says_what_the_loop_is_doing_between_tokens() -> None:
    def envelope(seq: int, event_type: str, **data: object) -> str:
        body = {"eventType": event_type, "seq": seq, "requestId": "r_1", "step": 1, "data": data}
        return json.dumps(body)

    def status_line() -> str:
        view = Console(file=io.StringIO(), width=100, height=40, color_system=None)
        with view.capture() as shown:
            view.print(renderer.view())
        return shown.get().strip().splitlines()[-1]

    out = io.StringIO()
    console = Console(file=out, width=100, height=40, force_terminal=True, color_system=None)
    renderer = LiveRenderer(out, console=console)
    renderer.feed(envelope(0, "PHASE_CHANGED", type="phase", phase="building_context"))
    assert "building the context · step 1" in status_line()
    renderer.feed(envelope(1, "PHASE_CHANGED", type="phase", phase="budgeting"))
    assert "checking the token budget" in status_line()
    renderer.feed(envelope(2, "PHASE_CHANGED", type="phase", phase="calling_model"))
    assert "waiting for the model" in status_line()
    tools = {"type": "phase", "phase": "running_tools", "toolNames": ["read_file", "read_file"]}
    renderer.feed(envelope(3, "PHASE_CHANGED", **tools))
    assert "running tools: read_file ·" in status_line()
    progress = {"type": "progress", "progressed": False, "failedToolResults": 1}
    renderer.feed(envelope(4, "PROGRESS_EVALUATED", noProgressCount=2, **progress))
    renderer.feed(envelope(5, "PHASE_CHANGED", type="phase", phase="compacting"))
    assert "compacting the conversation · no progress in 2 steps" in status_line()
    renderer.feed(envelope(6, "PHASE_CHANGED", type="phase", phase="a_phase_from_the_future"))
    assert "compacting the conversation" in status_line(), "a phase it does not know is ignored"
    renderer.close()

    plain = io.StringIO()
    lines = TerminalRenderer(plain, color=False)
    lines.feed(envelope(0, "PHASE_CHANGED", type="phase", phase="budgeting"))
    lines.feed(envelope(1, "PROGRESS_EVALUATED", noProgressCount=2, **progress))
    lines.feed(envelope(2, "STOP_REASON_DECIDED", type="stop_reason", reason="max_steps"))
    lines.close()
    assert plain.getvalue() == "  ◦ no progress in 2 steps in a row\n"


# --- the embedded runtime's tools and kernel ------------------------------------------------

VARIABLES = {
    "turns": [
        {
            "toolCalls": [
                {
                    "name": "python",
                    "arguments": {
                        "code": "import os\nanswer = 17 * 23\nprint(os.getpid(), answer)"
                    },
                }
            ]
        },
        {"toolCalls": [{"name": "list_variables", "arguments": {}}]},
        {"toolCalls": [{"name": "inspect_variable", "arguments": {"name": "answer"}}]},
        {"toolCalls": [{"name": "python", "arguments": {"code": "print(answer + 1)"}}]},
        {"text": "done"},
    ]
}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_kernel_tools_share_one_local_kernel_shut_down_at_exit(workdir: Path) -> None:
    done = cli(
        "run", *embedded(workdir, "go", "--model", script(workdir, VARIABLES), "--yes"), timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    printed = re.search(r"│ (\d+) 391\n", out)
    assert printed, out
    kernel_pid = int(printed.group(1))
    assert "│ answer: int = 391" in out  # list_variables sees the variable python made
    assert "│ 392" in out  # and the next python call too: one kernel for the whole run
    assert out.count("✓ python") == 2 and "✓ inspect_variable" in out
    # Shut down at exit (give the process table a moment to reap it).
    deadline = time.monotonic() + 30
    while alive(kernel_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(kernel_pid)


def test_no_kernel_is_started_for_a_run_that_needs_none(workdir: Path) -> None:
    done = cli("run", *embedded(workdir, "which variables are defined?", "--yes"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "✓ list_variables" in done.stdout and "no user variables" in done.stdout
    assert not (workdir / "data" / "kernel.log").exists()  # written by a kernel once started


def test_the_demo_computes_with_python_in_a_kernel_and_runs_skills(workdir: Path) -> None:
    done = cli("run", *embedded(workdir, "what is 17*23?", "--yes"), timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert '▸ python {"code": "print(17*23)"}' in done.stdout and "│ 391" in done.stdout
    assert "17*23 = 391" in done.stdout
    skill = cli("run", *embedded(workdir, "profile sales.csv with the skill", "--yes"), timeout=120)
    assert skill.returncode == 0, skill.stdout + skill.stderr
    assert "✓ run_skill" in skill.stdout and "skill profile_data" in skill.stdout


# --- questions without a terminal -------------------------------------------------------------

QUESTION = {
    "turns": [
        {"toolCalls": [{"name": "clarify", "arguments": {"question": "Which region?"}}]},
        {"text": "noted"},
    ]
}


def test_a_question_without_a_terminal_needs_answer(workdir: Path) -> None:
    model = script(workdir, QUESTION)
    waiting = cli("run", *embedded(workdir, "go", "--model", model))
    assert waiting.returncode == 3, waiting.stdout + waiting.stderr
    assert "the agent asks: Which region?" in waiting.stdout
    assert "--answer TEXT" in waiting.stdout and "Traceback" not in waiting.stderr
    answered = cli(
        "run", *embedded(workdir, "go", "--model", script(workdir, QUESTION), "--answer", "north")
    )
    assert answered.returncode == 0, answered.stdout + answered.stderr
    assert "✓ clarify" in answered.stdout and "│ north" in answered.stdout
    assert "\nnoted\n" in answered.stdout


# --- configuration from the Jupyter config files ----------------------------------------------


@pytest.fixture
def provider() -> Iterator[ProviderServer]:
    yield from serve()


def test_endpoints_model_and_rules_come_from_jupyter_config_files(
    workdir: Path, provider: ProviderServer
) -> None:
    config_dir = workdir / "jupyter-config"
    config_dir.mkdir()
    (config_dir / "jupyter_server_config.py").write_text(
        "c.NetaApp.endpoints = {\n"
        f'    "local": {{"kind": "openai", "base_url": "{provider.url}/v1", "models": ["qwen2.5"]}}\n'
        "}\n"
        "c.ServerApp.port = 9999  # the server's own settings are not the CLI's business\n"
    )
    env = {"JUPYTER_CONFIG_DIR": str(config_dir)}
    provider.reply(Reply.stream("openai_text"))
    done = cli("run", *embedded(workdir, "hello", "--model", "local:qwen2.5"), env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Bonjour, Zoë! The file has 2 rows." in done.stdout
    assert done.stderr == ""
    sent = provider.requests[0]
    assert sent.path == "/v1/chat/completions" and sent.json["model"] == "qwen2.5"
    assert {t["function"]["name"] for t in sent.json["tools"]} >= {"python", "run_skill"}

    # --config FILE comes last: here it makes that endpoint the default and denies reading.
    extra = workdir / "extra.json"
    rules = [{"tool": "read_file", "action": "deny", "description": "no reading today"}]
    extra.write_text(json.dumps({"NetaApp": {"model": "local:qwen2.5", "permission_rules": rules}}))
    provider.reply(Reply.stream("openai_text"))
    default = cli("run", *embedded(workdir, "hello", "--config", str(extra)), env=env)
    assert default.returncode == 0, default.stdout + default.stderr
    assert "Bonjour, Zoë!" in default.stdout and len(provider.requests) == 2
    denied = cli(
        "run",
        *embedded(workdir, "summarise a.txt", "--config", str(extra), "--model", "demo"),
        env=env,
    )
    assert denied.returncode == 0, denied.stdout + denied.stderr
    assert "✗ read_file" in denied.stdout and "no reading today" in denied.stdout


def test_a_broken_config_file_is_a_clear_error(workdir: Path) -> None:
    bad = workdir / "bad.py"
    bad.write_text("c.NetaApp.max_steps = 'many'\n")
    done = cli("run", *embedded(workdir, "hello", "--config", str(bad)))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "max_steps" in done.stderr and str(bad) in done.stderr
    missing = cli("run", *embedded(workdir, "hello", "--config", str(workdir / "nope.py")))
    assert missing.returncode == 2 and "no such file" in missing.stderr
    bad.write_text("c.NetaApp.endpoints = {'local': {'kind': 'openai'}}\n")
    endpoint = cli("run", *embedded(workdir, "hello", "--config", str(bad)))
    assert endpoint.returncode == 2 and "base_url is required" in endpoint.stderr


def test_a_sub_agents_permission_ask_is_answered_at_the_terminal(workdir: Path) -> None:
    turns = {
        "turns": [
            {"toolCalls": [{"name": "delegate", "arguments": {"tasks": [{"task": "read a.txt"}]}}]},
            {"toolCalls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
            {"text": "I was not allowed to read it."},
            {"text": "The sub-agent could not read a.txt."},
        ]
    }
    extra = workdir / "ask.json"
    rules = [{"tool": "read_file", "action": "ask", "description": "reading asks first"}]
    extra.write_text(json.dumps({"NetaApp": {"permission_rules": rules}}))
    done = cli(
        "run", *embedded(workdir, "go", "--model", script(workdir, turns)), "--config", str(extra)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    output = done.stdout + done.stderr
    assert "a sub-agent (sub-agent 1) asks:" in output
    assert "stdin is not a terminal, so read_file is denied" in output
    assert "The sub-agent could not read a.txt." in done.stdout
