"""``neta-jupyter run`` as a user runs it: a real process, the embedded runtime or a real server."""

from __future__ import annotations

import contextlib
import io
import json
import os
import pty
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from neta_jupyter import __version__
from neta_jupyter.cli_render import TerminalRenderer
from tests.cli_helpers import (
    READ_THEN_DONE,
    SLOW,
    TERMINAL,
    LiveCli,
    cli,
    cli_env,
    embedded,
    on_a_terminal,
    script,
    workdir,
)
from tests.server_process import ServerProcess

__all__ = ["workdir"]  # a fixture, imported for the tests below


# --- embedded runtime ------------------------------------------------------------------------


def test_run_renders_tool_card_files_and_answer(workdir: Path) -> None:
    done = cli("run", *embedded(workdir, "what files are here?", "--yes"))
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert '▸ list_files {"path": "."}' in out
    assert "✓ list_files" in out and "│ a.txt" in out
    assert "What I found" in out and "`sales.csv`" in out
    # An answer is the usual end: no reason code after it, only the usage.
    assert "■ completed · tokens: " in out and "total" in out and "(STOP)" not in out
    assert "\x1b[" not in out  # not a terminal: no colour codes


def test_ask_is_denied_when_stdin_is_not_a_terminal(workdir: Path) -> None:
    model = script(workdir, READ_THEN_DONE)
    done = cli(
        "run", *embedded(workdir, "read a.txt", "--model", model, "--ask", "read_file"), stdin="y\n"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "? read_file needs approval" in done.stdout
    assert "stdin is not a terminal" in done.stdout and "denied" in done.stdout
    assert "✗ read_file" in done.stdout and "alpha contents" not in done.stdout
    assert done.stdout.rstrip().endswith("total") and "\ndone\n" in done.stdout


@pytest.mark.parametrize(
    ("answer", "expected"),
    [(b"y\n", "  approved\n"), (b"a\n", "approved (always"), (b"n\n", "  denied\n")],
)
def test_ask_is_answered_on_the_terminal(workdir: Path, answer: bytes, expected: str) -> None:
    model = script(workdir, READ_THEN_DONE)
    code, out = on_a_terminal(
        "run",
        *embedded(workdir, "read a.txt", "--model", model, "--ask", "read_file"),
        answer=answer,
    )
    assert code == 0, out
    assert 'Allow read_file {"path": "a.txt"}? [y]es / [a]lways / [n]o:' in out
    assert expected in out
    if answer == b"n\n":
        assert "✗ read_file" in out and "denied permission" in out
        assert "alpha contents" not in out
    else:
        assert "✓ read_file" in out and "│ alpha contents" in out
        assert out.count("▸ read_file") == 1  # the resumed run continues the script
    assert "\ndone\n" in out and "■ completed" in out


def test_json_lines_are_the_envelopes_in_order(workdir: Path) -> None:
    done = cli("run", *embedded(workdir, "summarise a.txt", "--yes", "--json"))
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert [e["seq"] for e in events] == list(range(len(events)))
    names = [e["eventType"] for e in events]
    assert names[0] == "SESSION_CREATED"
    assert [n for n in names if n in TERMINAL] == ["MESSAGE_COMPLETED"] and names[-1] in TERMINAL
    assert len({e["requestId"] for e in events}) == 1
    assert done.stderr == ""


def test_ctrl_c_cancels_the_run(workdir: Path) -> None:
    live = LiveCli("run", *embedded(workdir, "go", "--model", script(workdir, SLOW)))
    live.wait_for("tok tok")
    live.proc.send_signal(signal.SIGINT)
    assert live.finish() == 130, live.output
    assert "interrupted: cancelling the run" in live.output
    # Stopped by the user is no failure: said as it is, without an error code.
    assert "■ stopped" in live.output and "USER_CANCELLED" not in live.output


def test_always_allow_is_remembered_in_the_named_session(workdir: Path) -> None:
    args = ["--model", script(workdir, READ_THEN_DONE), "--ask", "read_file", "--session", "nb"]
    code, out = on_a_terminal("run", *embedded(workdir, "read a.txt", *args), answer=b"a\n")
    assert code == 0 and "approved (always, for this session)" in out, out
    again = cli("run", *embedded(workdir, "read a.txt again", *args))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "needs approval" not in again.stdout and "│ alpha contents" in again.stdout


def test_max_steps_and_full_output_attachment(workdir: Path) -> None:
    (workdir / "root" / "big.txt").write_text("".join(f"row {i} {'x' * 60}\n" for i in range(600)))
    # More than one event carries: read_file shows 10,000 bytes unless asked for more.
    read_all = {"name": "read_file", "arguments": {"path": "big.txt", "max_bytes": 100_000}}
    model = script(workdir, {"turns": [{"toolCalls": [read_all]}]})
    done = cli(
        "run", *embedded(workdir, "read big.txt", "--model", model, "--yes", "--max-steps", "1")
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "■ completed (stopped at the step limit" in done.stdout
    saved = next(line for line in done.stdout.splitlines() if "full output: " in line)
    path = Path(saved.split("full output: ", 1)[1])
    assert path.is_file() and path.read_text().startswith("Contents of big.txt (600 lines")
    assert f"📎 {path.name}" in done.stdout


def test_a_file_the_agent_sends_is_shown_as_sent_with_where_to_open_it(workdir: Path) -> None:
    (workdir / "root" / "summary.csv").write_text("region,total\nnorth,12\n")
    send = {"name": "send_file", "arguments": {"path": "summary.csv"}}
    model = script(workdir, {"turns": [{"toolCalls": [send]}, {"text": "Here it is."}]})
    done = cli("run", *embedded(workdir, "send me the summary", "--model", model, "--yes"))
    assert done.returncode == 0, done.stdout + done.stderr
    shown = next(line for line in done.stdout.splitlines() if "📎 summary.csv" in line)
    assert "(22 bytes, sent) → " in shown
    assert Path(shown.split(" → ", 1)[1]).read_text() == "region,total\nnorth,12\n"


def test_attach_uploads_files_and_names_a_url_that_cannot_be_imported(workdir: Path) -> None:
    missing = cli("run", *embedded(workdir, "read it", "--attach", "nowhere.csv"))
    assert missing.returncode != 0 and "cannot attach nowhere.csv: no such file" in missing.stderr
    (workdir / "mine.csv").write_text("a,b\n1,2\n")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}/theirs.csv"
    args = ["--attach", str(workdir / "mine.csv"), "--attach", closed, "--json"]
    done = cli("run", *embedded(workdir, "compare them", *args))
    envelopes = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    failed = envelopes[-1]["data"]
    assert failed["errorCode"] == "ATTACHMENT_IMPORT_FAILED" and closed in failed["errorMessage"]
    # One folder per user, one per upload in it.
    [uploaded] = (workdir / "data" / "attachments" / "uploads").glob("*/*/mine.csv")
    assert uploaded.read_text() == "a,b\n1,2\n"


def test_plain_lines_are_coloured_only_on_a_terminal_and_never_with_no_color(
    workdir: Path,
) -> None:
    def on_tty(env: dict[str, str]) -> str:
        master, slave = pty.openpty()
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "neta_jupyter.cli",
                "run",
                *embedded(workdir, "what files are here?", "--yes", "--plain"),
            ],
            stdin=subprocess.DEVNULL,
            stdout=slave,
            stderr=slave,
            env=env,
        )
        os.close(slave)
        chunks = []
        with contextlib.suppress(OSError):  # EIO once the child has exited
            while chunk := os.read(master, 65536):
                chunks.append(chunk)
        os.close(master)
        assert proc.wait(60) == 0
        return b"".join(chunks).decode()

    coloured = on_tty(cli_env())
    assert "\x1b[2mthinking: " in coloured and "\x1b[32m✓ \x1b[0m" in coloured
    plain = on_tty({**cli_env(), "NO_COLOR": "1"})
    assert "\x1b[" not in plain and "✓ list_files" in plain


def test_ctrl_c_at_the_prompt_cancels_the_waiting_run(workdir: Path) -> None:
    master, slave = pty.openpty()
    try:
        args = ["--model", script(workdir, READ_THEN_DONE), "--ask", "read_file"]
        live = LiveCli("run", *embedded(workdir, "read a.txt", *args), stdin=slave)
        os.close(slave)
        live.wait_for("[y]es / [a]lways / [n]o: ")
        live.proc.send_signal(signal.SIGINT)
        assert live.finish() == 130, live.output
    finally:
        os.close(master)
    assert "[n]o: \ninterrupted: cancelling the run" in live.output
    # Stopped by the user is no failure: said as it is, without an error code.
    assert "■ stopped" in live.output and "USER_CANCELLED" not in live.output


def test_failed_run_exits_1(workdir: Path) -> None:
    failing = {"turns": [{"text": "part", "error": {"kind": "invalid", "message": "no way"}}]}
    done = cli("run", *embedded(workdir, "go", "--model", script(workdir, failing)))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "✗ run failed [LLM_INVALID_REQUEST]" in done.stdout and "no way" in done.stdout


def test_the_events_of_runs_finished_over_a_week_ago_are_deleted_from_the_data_folder(
    workdir: Path,
) -> None:
    import sqlite3

    from tests.store.test_retention import events_per_run

    first = cli("run", *embedded(workdir, "what files are here?", "--yes"))
    assert first.returncode == 0, first.stdout + first.stderr
    db = workdir / "data" / "neta.sqlite3"
    with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as conn:
        [(old,)] = conn.execute("SELECT request_id FROM runs").fetchall()
        assert events_per_run(conn)[old] > 0
        conn.execute("UPDATE runs SET updated = updated - 8 * 86400 WHERE request_id = ?", (old,))
    # Paced, so that the run lasts while the sweep started with the store looks at the file.
    paced = [a if a != "0" else "0.02" for a in embedded(workdir, "what files are here?", "--yes")]
    second = cli("run", *paced, timeout=120)
    assert second.returncode == 0, second.stdout + second.stderr
    with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as conn:
        [(new,)] = conn.execute("SELECT request_id FROM runs WHERE request_id != ?", (old,))
        kept = events_per_run(conn)
        assert kept[old] == 0, "the old run's events are deleted"
        assert kept[new] > 0, "the new run's events are kept"
        conn.execute("UPDATE runs SET updated = updated - 8 * 86400 WHERE request_id = ?", (new,))
    # The server's setting is the terminal's too: 0 keeps them forever.
    config = workdir / "keep.json"
    config.write_text(json.dumps({"NetaApp": {"event_retention": 0}}))
    third = cli("run", *paced, "--config", str(config), timeout=120)
    assert third.returncode == 0, third.stdout + third.stderr
    with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as conn:
        assert events_per_run(conn)[new] > 0, "kept, as configured"


def test_version_help_and_usage_errors(workdir: Path) -> None:
    assert cli("--version").stdout.strip() == f"neta-jupyter {__version__}"
    usage = cli("run", "--help").stdout
    for option in (
        "--model",
        "--yes",
        "--max-steps",
        "--root",
        "--data-dir",
        "--pace",
        "--session",
        "--json",
        "--plain",
        "--answer",
        "--config",
        "--ask",
        "--server",
        "--token",
        "exit status",
    ):
        assert option in usage
    mixed = cli("run", "hi", "--server", "http://127.0.0.1:9/", "--root", ".")
    assert mixed.returncode == 2 and "only apply to the embedded runtime" in mixed.stderr
    unknown = cli("run", *embedded(workdir, "hi", "--model", "nope"))
    assert unknown.returncode == 2 and "unknown model 'nope'" in unknown.stderr
    assert "Traceback" not in unknown.stderr


def test_renderer_shows_status_progress_attachments_and_ignores_unknown_events() -> None:
    def envelope(event_type: str, seq: int, **data: object) -> str:
        return json.dumps({"eventType": event_type, "seq": seq, "requestId": "r_1", "data": data})

    out = io.StringIO()
    renderer = TerminalRenderer(out, color=False, locate_attachment=lambda p: f"/files/{p}")
    payloads = [
        envelope("TEXT_START", 0, type="text", text="evil \x1b]0;title\x07text"),
        envelope(
            "AGENT_STATUS",
            1,
            type="agent_status",
            code="LLM_RATE_LIMITED",
            level="WARN",
            message="The model is rate-limited; retrying in 2.0 s (1/3)",
        ),
        envelope(
            "PROCESS_EVENT",
            2,
            type="process",
            operationId="op",
            stage="load",
            status="running",
            current=3,
            total=4,
            message="reading rows",
        ),
        envelope("SOMETHING_NEW", 3, type="brand_new", answer=42),
        envelope(
            "ATTACHMENT_CHANGED",
            4,
            type="attachment",
            attachmentId="a",
            sessionId="s",
            fileName="plot.png",
            fileExtension="png",
            contentType="image/png",
            fileSize=2048,
            virtualPath="s/r/plot.png",
        ),
        envelope(
            "TOOL_FAILED",
            5,
            type="tool",
            toolCallId="c",
            toolName="python",
            errorMessage="NameError: x",
            durationMs=1500,
        ),
        envelope(
            "MESSAGE_FAILED",
            6,
            type="message",
            errorCode="LLM_ERROR",
            errorMessage="model call failed",
            recoverable=True,
        ),
    ]
    events = [renderer.feed(p) for p in payloads]
    assert events[3] is None  # unknown types are skipped, not fatal
    text = out.getvalue()
    assert "evil text" in text and "title" not in text
    assert "\x1b" not in text and "\x07" not in text
    assert "\n[WARN] The model is rate-limited; retrying in 2.0 s (1/3)\n" in text
    assert "  ◦ load running 75% reading rows\n" in text
    assert "📎 plot.png (2048 bytes, created) → /files/s/r/plot.png\n" in text
    assert "✗ python (1.5 s) error: NameError: x\n" in text
    assert "✗ run failed [LLM_ERROR]: model call failed (recoverable" in text


# --- on a Jupyter server ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    rules = [{"tool": "read_file", "action": "ask", "description": "reading files needs approval"}]
    process = ServerProcess(tmp_path_factory.mktemp("server"), {"permission_rules": rules})
    (process.root / "notes.txt").write_text("quarterly revenue grew 12%\n")
    try:
        process.start()
        yield process
    finally:
        process.stop()


def test_server_run_with_token(server: ServerProcess) -> None:
    done = cli(
        "run", "what files are here?", "--server", server.url, "--token", server.token, "--yes"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "▸ list_files" in done.stdout and "`notes.txt`" in done.stdout
    assert "■ completed · tokens: " in done.stdout and "(STOP)" not in done.stdout
    assert server.token not in done.stdout + done.stderr


def test_server_bad_token_is_a_clear_error(server: ServerProcess) -> None:
    done = cli("run", "hello", "--server", server.url, "--token", "not-the-token")
    assert done.returncode == 2
    assert "check --token or $JUPYTER_TOKEN" in done.stderr and "Traceback" not in done.stderr
    assert "not-the-token" not in done.stdout + done.stderr


def test_server_permission_ask_via_resume_task(server: ServerProcess) -> None:
    code, out = on_a_terminal(
        "run",
        "summarise notes.txt",
        "--server",
        server.url,
        "--token",
        server.token,
        answer=b"y\n",
    )
    assert code == 0, out
    assert "? read_file needs approval (reading files needs approval)" in out
    assert "  approved\n" in out and "│ quarterly revenue grew 12%" in out
    assert "12%" in out.split("■ completed")[0].split("│ quarterly")[-1]
    assert server.token not in out


def test_server_question_is_answered_with_answer_or_left_waiting(
    server: ServerProcess, tmp_path: Path
) -> None:
    question = {
        "turns": [
            {"toolCalls": [{"name": "clarify", "arguments": {"question": "Which region?"}}]},
            {"text": "noted"},
        ]
    }
    remote = ["--server", server.url, "--token", server.token]
    # The server loads a script once and plays it across runs: one file per run here.
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    waiting = cli("run", "go", *remote, "--model", script(tmp_path / "first", question))
    assert waiting.returncode == 3, waiting.stdout + waiting.stderr
    assert "the agent asks: Which region?" in waiting.stdout and "--answer TEXT" in waiting.stdout
    assert "through the server's run API" in waiting.stdout
    model = script(tmp_path / "second", question)
    answered = cli("run", "go", *remote, "--model", model, "--answer", "north")
    assert answered.returncode == 0, answered.stdout + answered.stderr
    assert "✓ clarify" in answered.stdout and "│ north" in answered.stdout
    assert "\nnoted\n" in answered.stdout


def test_server_ctrl_c_terminates_the_run(server: ServerProcess, tmp_path: Path) -> None:
    live = LiveCli(
        "run",
        "go",
        "--server",
        server.url,
        "--token",
        server.token,
        "--model",
        script(tmp_path, SLOW),
    )
    live.wait_for("tok tok")
    live.proc.send_signal(signal.SIGINT)
    assert live.finish() == 130, live.output
    # Stopped by the user is no failure: said as it is, without an error code.
    assert "■ stopped" in live.output and "USER_CANCELLED" not in live.output


class DroppingProxy:
    """A TCP proxy that cuts the first event stream partway, as a flaky network would."""

    def __init__(self, target_port: int, cut_after: int) -> None:
        self.target_port = target_port
        self.cut_after = cut_after
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.cuts = 0
        self.resumed_streams = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            state = {"cut": False, "sent": 0}
            threading.Thread(target=self._up, args=(client, upstream, state), daemon=True).start()
            threading.Thread(target=self._down, args=(upstream, client, state), daemon=True).start()

    def _up(self, client: socket.socket, upstream: socket.socket, state: dict[str, int]) -> None:
        while data := _recv(client):
            if data.startswith(b"GET /neta/api/agent/run/stream"):
                if b"lastEventId" in data.split(b"\r\n", 1)[0]:
                    self.resumed_streams += 1
                elif self.cuts == 0:
                    self.cuts, state["cut"], state["sent"] = 1, True, 0
            upstream.sendall(data)
        upstream.close()

    def _down(self, upstream: socket.socket, client: socket.socket, state: dict[str, int]) -> None:
        while data := _recv(upstream):
            if state["cut"]:
                data = data[: self.cut_after - state["sent"]]
            client.sendall(data)
            state["sent"] += len(data)
            if state["cut"] and state["sent"] >= self.cut_after:
                break
        for sock in (client, upstream):
            # shutdown (not just close) sends the FIN and wakes the other pump's recv.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        self.listener.close()


def _recv(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except OSError:
        return b""


def test_server_stream_reconnects_with_last_event_id(server: ServerProcess) -> None:
    proxy = DroppingProxy(server.port, cut_after=3000)
    try:
        done = cli(
            "run",
            "what files are here?",
            "--server",
            f"http://127.0.0.1:{proxy.port}/",
            "--yes",
            "--json",
            env={"JUPYTER_TOKEN": server.token},  # the token from the environment this time
        )
    finally:
        proxy.close()
    assert done.returncode == 0, done.stderr
    assert proxy.cuts == 1 and proxy.resumed_streams >= 1
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert events[-1]["eventType"] == "MESSAGE_COMPLETED"
