"""Tools: schema from type hints, confinement to the root, permission rules."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from neta_jupyter.providers import ScriptedModel, ScriptedToolCall, ScriptedTurn
from neta_jupyter.runtime import Runtime
from neta_jupyter.tools import PermissionRule, ToolContext, decide, list_files, read_file
from neta_jupyter.tools.values import ToolError
from tests.helpers import ApiClient


def ctx(root: Path) -> ToolContext:
    return ToolContext(root_dir=root, session_id="s", request_id="r", tool_call_id="c")


def test_schema_is_derived_from_type_hints() -> None:
    schema = read_file.definition.parameters
    assert schema["required"] == ["path"]
    assert schema["properties"]["path"]["type"] == "string"
    assert schema["properties"]["max_bytes"]["maximum"] == 200_000
    assert schema["additionalProperties"] is False
    assert read_file.readonly and read_file.host == "server"


async def test_read_and_list_inside_the_root(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_text("hello")
    read = await read_file.run('{"path": "sub/a.txt"}', ctx(tmp_path))
    assert read == read_file_result("Contents of sub/a.txt (1 line, 5 bytes):\nhello")
    listing = (await list_files.run("{}", ctx(tmp_path))).output
    assert listing.splitlines() == [
        "Files in the notebook folder (1 entry; folders end with /):",
        "sub/",
    ]
    (tmp_path / "sub" / "a.txt").unlink()
    empty = (await list_files.run('{"path": "sub"}', ctx(tmp_path))).output
    assert empty == "Files in folder sub: none, the folder is empty."


def read_file_result(text: str) -> Any:
    from neta_jupyter.tools.values import ToolResult

    return ToolResult(text)


@pytest.mark.parametrize(
    "path", ["../outside.txt", "/etc/passwd", "sub/../../outside.txt", "link/x.txt"]
)
async def test_paths_escaping_the_root_are_refused(tmp_path: Path, path: str) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (tmp_path / "outside.txt").write_text("secret")
    os.symlink(tmp_path, root / "link")
    (tmp_path / "x.txt").write_text("secret")
    with pytest.raises(ToolError, match="outside the notebook root"):
        await read_file.run(f'{{"path": "{path}"}}', ctx(root))


async def test_a_long_file_is_read_in_parts_that_say_what_they_are(tmp_path: Path) -> None:
    lines = [f"row {n}: " + "x" * 60 for n in range(1, 1001)]
    (tmp_path / "long.txt").write_text("\n".join(lines) + "\n")
    size = (tmp_path / "long.txt").stat().st_size
    first = (await read_file.run('{"path": "long.txt"}', ctx(tmp_path))).output
    header, body = first.split("\n", 1)
    shown = body.splitlines()
    assert 100 < len(shown) < 1000 and shown == lines[: len(shown)]
    assert header == (
        f"Only lines 1-{len(shown)} of long.txt, which has 1,000 lines ({size:,} bytes) in all. "
        f"Lines {len(shown) + 1}-1000 are not shown: read on with read_file "
        f"offset={len(shown) + 1} (and limit for fewer lines):"
    )
    part = await read_file.run('{"path": "long.txt", "offset": 500, "limit": 3}', ctx(tmp_path))
    header, body = part.output.split("\n", 1)
    assert header.startswith("Only lines 500-502 of long.txt, which has 1,000 lines")
    assert "Lines 1-499 and 503-1000 are not shown" in header and "offset=503" in header
    assert body.splitlines() == lines[499:502]
    end = (await read_file.run('{"path": "long.txt", "offset": 999}', ctx(tmp_path))).output
    assert end.splitlines()[1:] == lines[998:]
    assert "read on" not in end.splitlines()[0]
    with pytest.raises(ToolError, match="offset 1001 is past the end of the file"):
        await read_file.run('{"path": "long.txt", "offset": 1001}', ctx(tmp_path))


async def test_a_table_says_how_many_rows_it_has(tmp_path: Path) -> None:
    (tmp_path / "sales.csv").write_text("region,units\nNorth,3\nSouth,4\n")
    (tmp_path / "names.csv").write_text("alpha,beta\ngamma,delta\n")
    table = (await read_file.run('{"path": "sales.csv"}', ctx(tmp_path))).output
    assert table.splitlines()[0] == (
        "Contents of sales.csv (3 lines, 29 bytes; a table: a header line and 2 rows, for sums or "
        "counts use python):"
    )
    words = (await read_file.run('{"path": "names.csv"}', ctx(tmp_path))).output
    assert words.splitlines()[0] == "Contents of names.csv (2 lines, 23 bytes):", (
        "no header to tell apart from the rows: nothing is claimed"
    )


async def test_a_line_longer_than_one_read_is_cut_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "min.json").write_text('{"a": "' + "y" * 30_000 + '"}')
    header = (await read_file.run('{"path": "min.json"}', ctx(tmp_path))).output.split("\n")[0]
    assert header.startswith("Only line 1 of min.json, which has 1 line (30,009 bytes) in all")
    assert "line 1 is cut after 10,000 bytes" in header
    (tmp_path / "empty.txt").write_text("")
    empty = (await read_file.run('{"path": "empty.txt"}', ctx(tmp_path))).output
    assert empty == "empty.txt is empty (0 bytes)."


async def test_bad_arguments_are_clear_tool_errors(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="not valid JSON"):
        await read_file.run("{oops", ctx(tmp_path))
    with pytest.raises(ToolError, match="path: Field required"):
        await read_file.run("{}", ctx(tmp_path))
    with pytest.raises(ToolError, match="no such file"):
        await read_file.run('{"path": "nope.txt"}', ctx(tmp_path))


def test_permission_rules_first_match_wins() -> None:
    rules = [
        PermissionRule(tool="read_file", args={"path": "secrets/*"}, action="deny"),
        PermissionRule(tool="read_*", action="ask", description="reads need approval"),
        PermissionRule(tool="python", args={"code": "*import os*"}, action="deny"),
    ]
    assert decide(rules, "read_file", {"path": "secrets/key"}, readonly=True).action == "deny"
    asked = decide(rules, "read_file", {"path": "data.csv"}, readonly=True)
    assert asked.action == "ask" and asked.rule_description == "reads need approval"
    assert asked.rule_pattern == "read_*"
    assert decide(rules, "list_files", {}, readonly=True).action == "allow"
    assert (
        decide(rules, "python", {"code": "import os; os.remove('x')"}, readonly=False).action
        == "deny"
    )
    assert decide(rules, "python", {"code": "1+1"}, readonly=False).action == "ask"
    always = decide(
        rules, "read_file", {"path": "a"}, readonly=True, always_allowed=frozenset({"read_file"})
    )
    assert always.action == "allow"
    still_denied = decide(
        rules,
        "read_file",
        {"path": "secrets/k"},
        readonly=True,
        always_allowed=frozenset({"read_file"}),
    )
    assert still_denied.action == "deny", "always-allow never overrides a deny rule"


async def test_escaping_path_through_the_api_is_tool_failed(
    api: ApiClient, runtime: Runtime
) -> None:
    runtime.models.register(
        "s",
        ScriptedModel(
            [
                ScriptedTurn(
                    tool_calls=[ScriptedToolCall("read_file", {"path": "../../etc/passwd"})]
                ),
                ScriptedTurn(text="I cannot read that."),
            ]
        ),
    )
    events = await api.segment((await api.start("read passwd", model="s"))["requestId"])
    failed = next(e for e in events if e["eventType"] == "TOOL_FAILED")["data"]
    assert "outside the notebook root" in failed["errorMessage"]
    assert events[-1]["eventType"] == "MESSAGE_COMPLETED"
    assert "root:" not in str(events)


async def test_a_deny_rule_on_a_path_holds_however_the_path_is_spelled(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (jp_root_dir / "secrets").mkdir()
    (jp_root_dir / "secrets" / "key.txt").write_text("TOPSECRET-42")
    (jp_root_dir / "notes").mkdir()
    (jp_root_dir / "shortcut").symlink_to(jp_root_dir / "secrets")
    rule = PermissionRule(tool="read_file", args={"path": "secrets/*"}, action="deny")
    monkeypatch.setattr(runtime.config, "permission_rules", [rule])
    spellings = [
        "./secrets/key.txt",
        "notes/../secrets/key.txt",
        str(jp_root_dir / "secrets" / "key.txt"),
        "shortcut/key.txt",
        "secrets//key.txt",
    ]
    calls = [ScriptedToolCall("read_file", {"path": p}) for p in spellings]
    runtime.models.register(
        "s", ScriptedModel([ScriptedTurn(tool_calls=calls), ScriptedTurn(text="denied")])
    )
    events = await api.segment((await api.start("read the key", model="s"))["requestId"])
    failed = [e["data"] for e in events if e["eventType"] == "TOOL_FAILED"]
    assert len(failed) == len(spellings), events
    assert all("not allowed" in f["errorMessage"] for f in failed), failed
    assert "TOPSECRET-42" not in str(events)
    assert not [e for e in events if e["eventType"] == "TOOL_COMPLETED"]


@pytest.fixture
def neta_config() -> dict[str, Any]:
    return {"heartbeat_interval": 0.1}


async def test_idle_stream_gets_heartbeats_without_ids(api: ApiClient, runtime: Runtime) -> None:
    runtime.models.register(
        # About two seconds of silence at 0.1 s heartbeats: three beats even on a loaded machine.
        "slow",
        ScriptedModel([ScriptedTurn(text=["a ", "b ", "c"], delay=1.0)]),
    )
    frames = await api.frames((await api.start("slow", model="slow"))["requestId"])
    beats = [f for f in frames if f.event == "HEARTBEAT"]
    assert len(beats) >= 3
    assert all(f.id in ("", None) or f.id == frames[frames.index(f) - 1].id for f in beats)
    assert all(f.json["data"]["type"] == "heartbeat" and "seq" not in f.json for f in beats)
    ids = [int(f.id) for f in frames if f.event != "HEARTBEAT"]
    assert ids == list(range(len(ids)))


def test_a_rule_naming_a_client_decides_only_that_mcp_clients_calls() -> None:
    rules = [
        PermissionRule(tool="*_cell", action="allow", client="claude*"),
        PermissionRule(tool="python", action="deny", client="cursor"),
    ]
    edit = {"cell_id": "c1"}
    assert decide(rules, "edit_cell", edit, readonly=False, client="claude-code").action == "allow"
    assert decide(rules, "edit_cell", edit, readonly=False, client="codex").action == "ask"
    assert decide(rules, "edit_cell", edit, readonly=False).action == "ask"  # a neta run's call
    assert decide(rules, "python", {}, readonly=False, client="cursor").action == "deny"
    assert decide(rules, "python", {}, readonly=False, client="claude-code").action == "ask"
    assert rules[1].pattern == "python client=cursor"
