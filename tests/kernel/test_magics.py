"""``%neta`` / ``%%neta`` in real kernels: parsing, subcommands, display, and the host choice."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from jupyter_client.session import Session

from neta_jupyter.kernel.options import interpolate, parse_options
from neta_jupyter.runtime import Runtime
from tests.helpers import ApiClient
from tests.kernel.test_embedded import KernelSession, kernel

pytestmark = pytest.mark.timeout(90)

WIDGET = "application/vnd.jupyter.widget-view+json"
LAST = "from neta_jupyter.kernel import current_context as _cc\n_last = _cc().last\n"
STARTED_ID = """
import asyncio, json
from neta_jupyter.kernel import current_context as _cc
for _ in range(3000):  # a minute at most
    if _cc().last.request_id or _cc().last.start_error:
        break
    await asyncio.sleep(0.02)
print(json.dumps(_cc().last.request_id))
"""


def slow_script(tmp_path: Path, words: int = 12, delay: float = 0.25) -> Path:
    path = tmp_path / "slow.json"
    text = " ".join(f"word{i}" for i in range(words)) + " THE-END"
    path.write_text(json.dumps({"turns": [{"text": text, "delay": delay}]}))
    return path


# --- parsing (no kernel needed)


def test_options_before_and_after_the_prompt() -> None:
    options, prompt = parse_options("--model demo --new what is {x}? --approve auto")
    assert options == {"model": "demo", "new": True, "approve": "auto"}
    assert prompt == "what is {x}?"
    options, prompt = parse_options("what's in df --tools list_variables,python --max-steps 3")
    assert options == {"tools": ["list_variables", "python"], "max-steps": 3}
    assert prompt == "what's in df", "an apostrophe is not a quote"
    options, prompt = parse_options("--thinking high prove it")
    assert options == {"thinking": "high"} and prompt == "prove it"


def test_attach_takes_several_files_and_urls() -> None:
    options, prompt = parse_options("--attach a.csv,b.png what is here? --attach https://h/c.csv")
    assert options == {"attach": ["a.csv", "b.png", "https://h/c.csv"]}
    assert prompt == "what is here?"


def test_a_bare_double_dash_ends_the_options() -> None:
    options, prompt = parse_options('--session "my notebook" -- --new is a word here')
    assert options == {"session": "my notebook"}
    assert prompt == "--new is a word here"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("--approve maybe hi", "--approve must be"),
        ("--max-steps none hi", "whole number"),
        ("--max-steps 0 hi", "at least 1"),
        ("--thinking hard hi", "--thinking must be one of off, low, medium, high"),
        ("--colour red hi", "unknown option --colour"),
        ("--model", "needs a value"),
    ],
)
def test_bad_options_are_usage_errors(line: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_options(line)


def test_interpolation_of_names_from_the_namespace() -> None:
    namespace = {"x": 5, "name": "sales"}
    text = interpolate("{name}: {x} {{x}} {missing} {x.real} {x.nope} {not a name}", namespace)
    assert text == "sales: 5 {x} {missing} 5 {x.nope} {not a name}"


# --- in an embedded kernel


async def test_magic_returns_at_once_and_the_output_carries_widget_and_markdown(
    tmp_path: Path,
) -> None:
    script = slow_script(tmp_path)
    env = {"JPY_SESSION_NAME": str(tmp_path / "analysis.ipynb")}
    async with kernel(tmp_path, env) as k:
        await k.run("%load_ext neta_jupyter\ntopic = 'sales'")
        own = await k.run(f"%neta --model scripted:{script} tell me about {{topic}}")
        shown = next(m for m in own if m["msg_type"] == "display_data")
        data = shown["content"]["data"]
        assert WIDGET in data and "text/markdown" in data
        assert "> tell me about sales" in data["text/markdown"]
        assert "running" in data["text/markdown"]
        display_id = shown["content"]["transient"]["display_id"]

        state = await k.json(
            LAST
            + "print(__import__('json').dumps([_last.status, _last.prompt, _last.options.session_name,"
            " _last.widget.mode, _last.widget.request_id, _last.options.notebook_path]))"
        )
        status, prompt, session, mode, request_id, path = state
        assert path == session, "the run knows the notebook (for its folder's AGENTS.md)"
        assert status in ("starting", "running"), "the cell finished before the run"
        assert prompt == "tell me about sales"
        assert session == str(tmp_path / "analysis.ipynb"), "the notebook is the session"
        assert mode == "embedded" and request_id.startswith("r_")

        update = await k.wait_for(
            lambda m: (
                m["msg_type"] == "update_display_data"
                and m["content"]["transient"]["display_id"] == display_id
            ),
            timeout=30,
        )
        markdown = update["content"]["data"]["text/markdown"]
        assert "THE-END" in markdown and "completed" in markdown
        assert WIDGET in update["content"]["data"]
        snapshot = await k.json(LAST + "print(__import__('json').dumps(_last.widget.snapshot))")
        assert snapshot["status"] == "completed" and snapshot["finalText"].endswith("THE-END")
        assert snapshot["requestId"] == request_id


async def test_cell_magic_and_new_sessions(tmp_path: Path) -> None:
    async with kernel(tmp_path, {"NETA_DEMO_PACE": "0"}) as k:
        await k.run("%load_ext neta_jupyter\nn = 3")
        await k.run("%%neta --approve deny\nwhat is {n} * 7?\n")
        first = await k.json(
            LAST + "await _last.wait(30)\n"
            "print(__import__('json').dumps([_last.prompt, _last.options.session_name,"
            " _last.options.approve, _last.status]))",
            timeout=40,
        )
        assert first == ["what is 3 * 7?", "default", "deny", "completed"]
        await k.run("%neta --new hello there")
        second = await k.json(
            LAST + "await _last.wait(30)\n"
            "print(__import__('json').dumps([_last.options.session_name, _cc().session()]))",
            timeout=40,
        )
        assert second[0].startswith("default @ ") and second[1] == second[0]
        await k.run("%neta --max-steps 2 --tools read_file --thinking low --model demo hi")
        third = await k.json(
            LAST + "await _last.wait(30)\no = _last.options\n"
            "print(__import__('json').dumps([o.max_steps, o.tools, o.thinking_level, o.model]))",
            timeout=40,
        )
        assert third == [2, ["read_file"], "low", "demo"]
        with pytest.raises(AssertionError, match="holds options only"):
            await k.run("%%neta --model demo stray words\nprompt")


async def test_new_twice_in_one_second_gives_two_sessions(tmp_path: Path) -> None:
    script = tmp_path / "ask.json"
    call = {"toolCalls": [{"name": "python", "arguments": {"code": "1 + 1"}}]}
    script.write_text(json.dumps({"turns": [call, call]}))
    async with kernel(tmp_path, {"NETA_DEMO_PACE": "0"}) as k:
        await k.run("%load_ext neta_jupyter\n%neta hello")
        await k.run(LAST + "await _last.wait(30)", timeout=40)
        # As "Run All" does: two cells with --new, well within one second.
        await k.run(
            f"%neta --new --model scripted:{script} first\n"
            f"%neta --new --model scripted:{script} second"
        )
        runs = await k.json(
            "import asyncio, json\nfrom neta_jupyter.kernel import current_context as _cc\n"
            "for _ in range(400):\n"
            "    if all(h.at_rest for h in _cc().launched): break\n"
            "    await asyncio.sleep(0.05)\n"
            "print(json.dumps([[h.options.session_name, h.status, h.error] for h in _cc().launched[1:]]))",
            timeout=40,
        )
    (first, first_status, first_error), (second, second_status, _) = runs
    assert first != second, "each --new is a conversation of its own"
    assert first.startswith("default @ ") and second.startswith("default @ ")
    assert (first_status, second_status) == ("suspended", "suspended"), first_error


async def test_subcommands(tmp_path: Path) -> None:
    async with kernel(tmp_path, {"NETA_DEMO_PACE": "0"}) as k:
        await k.run("%load_ext neta_jupyter")
        assert "Subcommands:" in await k.stdout("%neta help")
        assert "Subcommands:" in await k.stdout("%neta")
        assert "demo  (default)" in await k.stdout("%neta models")
        config = await k.stdout("%neta config")
        assert "mode: embedded" in config and "session: default" in config
        assert "no conversations yet" in await k.stdout("%neta sessions")

        await k.run("%neta what is 6*7? --approve auto")
        rid = await k.json(
            LAST + "await _last.wait(30)\nprint(__import__('json').dumps(_last.request_id))",
            timeout=40,
        )
        status = await k.stdout("%neta status")
        assert rid in status and "completed" in status and "what is 6*7?" in status
        assert "default" in await k.stdout("%neta sessions")
        history = await k.stdout("%neta history")
        assert rid in history and "what is 6*7?" in history
        assert rid in await k.stdout("%neta history --session default")

        own = await k.run(f"%neta show {rid}")
        shown = next(m for m in own if m["msg_type"] == "display_data")
        assert "what is 6*7?" in shown["content"]["data"]["text/markdown"]
        assert "42" in await k.stdout(LAST + "await _last.wait(30)\nprint(_last.text)", timeout=40)
        with pytest.raises(AssertionError, match="no run"):
            await k.run("%neta status r_doesnotexist")
        # A prompt that merely starts with a subcommand's name is a prompt.
        await k.run("%neta status of my data?")
        assert await k.json(LAST + "print(__import__('json').dumps(_last.prompt))") == (
            "status of my data?"
        )


async def test_stop_ends_a_running_run(tmp_path: Path) -> None:
    script = slow_script(tmp_path, words=200, delay=0.1)
    async with kernel(tmp_path) as k:
        await k.run("%load_ext neta_jupyter")
        await k.run(f"%neta --model scripted:{script} go slowly")
        assert (await k.json(STARTED_ID)).startswith("r_")
        assert "stopping r_" in await k.stdout("%neta stop")
        final = await k.json(
            LAST + "await _last.wait(30)\n"
            "print(__import__('json').dumps([_last.status, _last.error]))",
            timeout=40,
        )
        assert final == ["failed", "the run was cancelled"]


# --- a kernel started by the Jupyter server runs its prompts there


@asynccontextmanager
async def server_kernel(jp_serverapp: Any) -> AsyncIterator[tuple[str, KernelSession]]:
    mapping = jp_serverapp.kernel_manager
    kernel_id = await mapping.start_kernel()
    manager = mapping.get_kernel(kernel_id)
    client = manager.client(
        session=Session(key=manager.session.key, signature_scheme=manager.session.signature_scheme)
    )
    client.start_channels()
    await client.wait_for_ready(timeout=60)

    class _Shutdown:
        async def shutdown_kernel(self, now: bool = True) -> None:
            await mapping.shutdown_kernel(kernel_id, now=now)

    session = KernelSession(_Shutdown(), client)
    try:
        yield kernel_id, session
    finally:
        await session.close()


async def test_server_started_kernel_creates_runs_on_the_server(
    jp_serverapp: Any, api: ApiClient, runtime: Runtime
) -> None:
    async with server_kernel(jp_serverapp) as (kernel_id, k):
        await k.run(
            "%load_ext neta_jupyter\nimport pandas as pd\nsales = pd.DataFrame({'q': [1, 2]})"
        )
        own = await k.run("%neta what variables do I have?")
        data = next(m for m in own if m["msg_type"] == "display_data")["content"]["data"]
        assert WIDGET in data and "text/markdown" in data
        rid = await k.json(STARTED_ID)
        events = await api.segment(rid)
        assert events[-1]["eventType"] == "MESSAGE_COMPLETED"
        outputs = [e["data"]["output"] for e in events if e["eventType"] == "TOOL_COMPLETED"]
        # Read in this very kernel: live once it is idle, or (while the cell above still runs)
        # as the %neta cell saw it.
        assert "\nsales: DataFrame (2, 1)" in "\n" + outputs[0]
        record = await runtime.store.records.get_run(rid)
        assert record is not None and record.options["kernelId"] == kernel_id
        assert (await api.status(rid))["status"] == "completed"

        report = await k.json(
            LAST + "await _last.wait(30)\n"
            "print(__import__('json').dumps([_last.host.mode, _last.widget.mode,"
            " _last.status, _last.widget.snapshot['status']]))"
        )
        assert report == ["server", "server", "completed", "completed"]
        config = await k.stdout("%neta config")
        assert "mode: server" in config and kernel_id in config


async def test_awaiting_a_server_run_that_needs_the_busy_kernel_fails_clearly(
    jp_serverapp: Any, api: ApiClient
) -> None:
    async with server_kernel(jp_serverapp) as (_kernel_id, k):
        await k.run("import neta_jupyter\nfrom neta_jupyter.kernel.handle import RunNeedsKernel")
        outcome = await k.stdout(
            "run = neta_jupyter.ask('what variables do I have?')\n"
            "try:\n"
            "    await run.wait(60)\n"
            "except RunNeedsKernel as exc:\n"
            "    print(exc.tool_name, run.status)\n",
            timeout=90,
        )
        assert outcome.strip() == "list_variables running"
        rid = await k.json("print(__import__('json').dumps(run.request_id))")
        # Once the cell has ended, the queued tool runs and the run completes.
        assert (await api.segment(rid))[-1]["eventType"] == "MESSAGE_COMPLETED"


ATTACHED = """
import asyncio, json
from neta_jupyter.kernel import current_context as _cc
_run = _cc().last
await _run.wait(60)
_first = [e for e in _cc().host.history(_cc().session()) if e["role"] == "user"][-1]
print(json.dumps([_run.status, _first["message"]["attachments"]]))
"""


async def test_attach_uploads_a_file_from_the_kernels_folder_with_the_prompt(
    jp_serverapp: Any, api: ApiClient, tmp_path: Path
) -> None:
    async with server_kernel(jp_serverapp) as (_kernel_id, k):
        await k.run(
            f"%load_ext neta_jupyter\nimport os\nos.chdir({str(tmp_path)!r})\n"
            "open('prices.csv', 'w').write('item,price\\ntea,3\\n')"
        )
        refused = await k.stdout(
            "from IPython.core.error import UsageError\n"
            "try:\n"
            "    get_ipython().run_line_magic('neta', '--attach missing.csv what is in it?')\n"
            "except UsageError as exc:\n"
            "    print(exc)\n"
        )
        assert "cannot attach missing.csv: no such file" in refused
        await k.run("%neta --attach prices.csv --approve auto what is in the file?")
        status, [attached] = await k.json(ATTACHED, timeout=90)
        assert status == "completed"
        assert attached["fileName"] == "prices.csv" and attached["fileSize"] == len(
            "item,price\ntea,3\n"
        )
        got = await api.http.get(
            "neta/api/agent/attachment/download", params={"virtualPath": attached["virtualPath"]}
        )
        assert got.content == b"item,price\ntea,3\n"
