"""Skills: discovery, the built-in profiling skill through the server API, crashes, missing
skills, timeouts and cancellation (the whole process tree is killed)."""

from __future__ import annotations

import asyncio
import csv
import importlib.util
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from neta_jupyter.providers import ScriptedModel, ScriptedToolCall, ScriptedTurn
from neta_jupyter.runtime import Runtime
from neta_jupyter.tools import ToolContext, discover_skills, run_skill
from neta_jupyter.tools.skills import builtin_skills_dir, parse_skill_file, skill_catalogue
from neta_jupyter.tools.values import ToolError
from tests.helpers import ApiClient, assert_in_order, types


def write_sales(folder: Path) -> None:
    """40 orders: `units` misses 6 values, `price` has one absurd value (999)."""
    with (folder / "sales.csv").open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["order_id", "region", "units", "price"])
        for i in range(40):
            units = "" if i % 7 == 0 else str(1 + i % 10)
            price = "999.0" if i == 13 else f"{10 + (i % 5) * 0.5:.2f}"
            writer.writerow([i, ["north", "south", "east"][i % 3], units, price])


def make_skill(root: Path, name: str, script: str, *, timeout: float | None = None) -> Path:
    folder = root / ".neta" / "skills" / name
    folder.mkdir(parents=True)
    extra = f"timeout: {timeout}\n" if timeout is not None else ""
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: test skill {name}\nentry: {{python}} main.py\n"
        f"{extra}---\n\nA skill for the tests.\n"
    )
    (folder / "main.py").write_text(textwrap.dedent(script))
    return folder


def script(runtime: Runtime, name: str, args: dict[str, Any]) -> ScriptedModel:
    model = ScriptedModel(
        [
            ScriptedTurn(tool_calls=[ScriptedToolCall("run_skill", {"name": name, "args": args})]),
            ScriptedTurn(text="Here is what the skill found."),
        ]
    )
    runtime.models.register("scripted", model)
    return model


def alive(pid: int) -> bool:
    """Running (a zombie nobody reaped yet counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def real(path: Path) -> str:
    return str(path.resolve())


def read_pids(pidfile: Path) -> list[int] | None:
    return [int(p) for p in pidfile.read_text().split()] if pidfile.exists() else None


def context(root: Path) -> ToolContext:
    return ToolContext(root_dir=root, session_id="s", request_id="r", tool_call_id="c")


# --- discovery -----------------------------------------------------------------------------


def test_builtin_skill_ships_with_the_package() -> None:
    folder = builtin_skills_dir()
    assert folder is not None
    assert (folder / "profile_data" / "profile.py").is_file()
    skill = parse_skill_file(folder / "profile_data" / "SKILL.md", builtin=True)
    assert skill.name == "profile_data" and "{python}" in skill.entry
    assert "profile_data" in run_skill.description


def test_project_skills_hide_builtin_ones_and_broken_ones_are_skipped(tmp_path: Path) -> None:
    make_skill(tmp_path, "profile_data", "print('mine')")
    broken = tmp_path / ".neta" / "skills" / "broken"
    broken.mkdir()
    (broken / "SKILL.md").write_text("---\nname: broken\n---\nno entry\n")
    skills = discover_skills(tmp_path)
    assert skills["profile_data"].folder == tmp_path / ".neta" / "skills" / "profile_data"
    assert "broken" not in skills


async def test_parquet_without_an_engine_is_a_clear_error(tmp_path: Path) -> None:
    if importlib.util.find_spec("pyarrow") or importlib.util.find_spec("fastparquet"):
        pytest.skip("a Parquet engine is installed")
    (tmp_path / "t.parquet").write_bytes(b"PAR1")
    arguments = json.dumps({"name": "profile_data", "args": {"path": "t.parquet"}})
    with pytest.raises(ToolError, match="pyarrow"):
        await run_skill.run(arguments, context(tmp_path))


@pytest.mark.parametrize(
    ("name", "text", "why"),
    [
        ("notes.txt", "Meeting moved to Thursday.\nBring the Q3 numbers.\n", "it is text"),
        ("README.md", "# Title\n\nSome words.\n", ".md files are not tables"),
    ],
)
async def test_a_file_that_is_not_a_table_is_refused_with_a_hint(
    tmp_path: Path, name: str, text: str, why: str
) -> None:
    """A small model once profiled notes.txt and answered that it held nothing meaningful."""
    (tmp_path / name).write_text(text)
    arguments = json.dumps({"name": "profile_data", "args": {"path": name}})
    with pytest.raises(ToolError) as refused:
        await run_skill.run(arguments, context(tmp_path))
    message = str(refused.value)
    assert f"cannot profile {name}: {why}" in message
    assert "To see what a text file says, use read_file instead." in message


async def test_a_text_file_holding_a_table_is_profiled(tmp_path: Path) -> None:
    (tmp_path / "export.txt").write_text("city,price\nParis,3\nOslo,4\nLima,5\n")
    arguments = json.dumps({"name": "profile_data", "args": {"path": "export.txt"}})
    result = await run_skill.run(arguments, context(tmp_path))
    assert "3 rows" in result.output and "price" in result.output


async def test_secret_environment_stays_out_of_a_skill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_SERVICE_API_KEY", "sk-env-secret")
    monkeypatch.setenv("HARMLESS_SETTING", "visible")
    make_skill(
        tmp_path,
        "env",
        """
        import json, os
        keys = {k: os.environ.get(k) for k in ("MY_SERVICE_API_KEY", "HARMLESS_SETTING")}
        keys["root"] = os.environ["NETA_ROOT_DIR"]
        print(json.dumps({"type": "result", "output": json.dumps(keys)}))
        """,
    )
    result = await run_skill.run(json.dumps({"name": "env"}), context(tmp_path))
    seen = json.loads(result.output)
    assert seen == {
        "MY_SERVICE_API_KEY": None,
        "HARMLESS_SETTING": "visible",
        "root": real(tmp_path),
    }


# --- through the server ---------------------------------------------------------------------


async def test_profiling_skill_end_to_end(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    write_sales(jp_root_dir)
    model = script(runtime, "profile_data", {"path": "sales.csv"})
    rid = (await api.start("profile sales.csv", model="scripted", approve="auto"))["requestId"]
    events = await api.segment(rid)
    names = types(events)
    assert names[-1] == "MESSAGE_COMPLETED", events[-1]
    assert_in_order(
        names,
        ["TOOL_START", "SKILL_ACTIVATED", "PROCESS_EVENT", "TOOL_COMPLETED", "MESSAGE_COMPLETED"],
    )
    activated = next(e["data"] for e in events if e["eventType"] == "SKILL_ACTIVATED")
    assert activated["skillName"] == "profile_data" and activated["operationId"]
    assert "SKILL_DEACTIVATED" in names

    process = [e["data"] for e in events if e["eventType"] == "PROCESS_EVENT"]
    stages = [p.get("stage") for p in process]
    for stage in ("load", "columns", "missing", "outliers", "summary"):
        assert stage in stages, stages
    percents = [p["percent"] for p in process if "percent" in p]
    assert percents == sorted(percents) and percents[-1] == 100
    assert all(p["targetType"] == "skill" and p["source"] == "skill" for p in process)
    assert any("current" in p and "total" in p for p in process)
    assert process[-1]["status"] == "completed"

    output = next(e["data"] for e in events if e["eventType"] == "TOOL_COMPLETED")["output"]
    assert "# Profile of `sales.csv`" in output
    assert "40 rows, 4 columns" in output
    assert "| units | 6 | 15% |" in output  # missing values
    assert "## Outliers" in output and "| price | 1 |" in output and "999" in output
    ref = output.split("[process log: ")[1].rstrip("]")
    logged = [json.loads(line) for line in (runtime.config.data_dir / ref).read_text().splitlines()]
    assert logged == process
    model.assert_complete()


async def test_unknown_skill_is_reported_missing(api: ApiClient, runtime: Runtime) -> None:
    script(runtime, "no_such_skill", {})
    rid = (await api.start("run it", model="scripted", approve="auto"))["requestId"]
    events = await api.segment(rid)
    missing = next(e["data"] for e in events if e["eventType"] == "SKILL_MISSING")
    assert missing["skillName"] == "no_such_skill"
    failed = next(e["data"] for e in events if e["eventType"] == "TOOL_FAILED")
    assert "no skill named 'no_such_skill'" in failed["errorMessage"]
    assert "available skills: profile_data" in failed["errorMessage"]
    assert "SKILL_ACTIVATED" not in types(events)
    assert types(events)[-1] == "MESSAGE_COMPLETED"


async def test_crashing_skill_fails_with_the_tail_of_its_stderr(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    make_skill(
        jp_root_dir,
        "crash",
        """
        import json, sys
        print(json.dumps({"type": "progress", "stage": "warm-up", "percent": 5}), flush=True)
        for i in range(1, 31):
            print(f"stderr line {i}", file=sys.stderr)
        print("ValueError: the data is cursed", file=sys.stderr)
        sys.exit(3)
        """,
    )
    script(runtime, "crash", {})
    rid = (await api.start("crash", model="scripted", approve="auto"))["requestId"]
    events = await api.segment(rid)
    failed = next(e["data"] for e in events if e["eventType"] == "TOOL_FAILED")
    message = failed["errorMessage"]
    assert "skill crash exited with code 3" in message
    assert "ValueError: the data is cursed" in message and "stderr line 30" in message
    assert "stderr line 5\n" not in message  # only the tail
    process = [e["data"] for e in events if e["eventType"] == "PROCESS_EVENT"]
    assert process[-1]["status"] == "failed" and process[-1]["level"] == "error"
    assert "SKILL_DEACTIVATED" in types(events)
    assert types(events)[-1] == "MESSAGE_COMPLETED"


TREE_SKILL = """
import json, os, subprocess, sys, time
args = json.loads(sys.stdin.read())
child = subprocess.Popen(["sleep", "60"])
with open(args["pidfile"] + ".tmp", "w") as file:
    file.write(f"{os.getpid()} {child.pid}")
os.replace(args["pidfile"] + ".tmp", args["pidfile"])
print(json.dumps({"type": "progress", "stage": "waiting", "message": "sleeping"}), flush=True)
time.sleep(60)
"""


async def wait_for_pids(pidfile: Path) -> list[int]:
    for _ in range(1200):  # a minute at most
        if (pids := read_pids(pidfile)) is not None:
            return pids
        await asyncio.sleep(0.05)
    raise AssertionError("the skill never started")


async def wait_gone(pids: list[int], seconds: float = 30.0) -> None:
    for _ in range(int(seconds / 0.05)):
        if not any(alive(p) for p in pids):
            return
        await asyncio.sleep(0.05)
    assert not [p for p in pids if alive(p)], "processes of the skill survived"


async def test_cancel_kills_the_skills_process_tree(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path
) -> None:
    make_skill(jp_root_dir, "tree", TREE_SKILL)
    pidfile = jp_root_dir / "pids.txt"
    script(runtime, "tree", {"pidfile": str(pidfile)})
    rid = (await api.start("spawn", model="scripted", approve="auto"))["requestId"]
    pids = await wait_for_pids(pidfile)
    assert all(alive(p) for p in pids)
    response = await api.post("terminateTask", {"requestId": rid})
    assert response.status_code == 200, response.text
    await wait_gone(pids)
    events = await api.segment(rid)
    assert types(events)[-1] == "MESSAGE_FAILED"
    assert events[-1]["data"]["errorCode"] == "USER_CANCELLED"
    process = [e["data"] for e in events if e["eventType"] == "PROCESS_EVENT"]
    assert process[-1]["status"] == "cancelled"
    assert "SKILL_DEACTIVATED" in types(events)


async def test_timeout_kills_the_skills_process_tree(tmp_path: Path) -> None:
    make_skill(tmp_path, "tree", TREE_SKILL, timeout=1)
    pidfile = tmp_path / "pids.txt"
    arguments = json.dumps({"name": "tree", "args": {"pidfile": str(pidfile)}})
    with pytest.raises(ToolError, match="timed out after 1 s"):
        await run_skill.run(arguments, context(tmp_path))
    await wait_gone(await wait_for_pids(pidfile))


def test_the_skill_list_follows_edits_to_project_skills(tmp_path: Path) -> None:
    """Skills are listed at every model call: one added, edited, broken or removed shows at once."""
    make_skill(tmp_path, "tidy", "print('tidy')")
    first = dict(skill_catalogue(tmp_path))
    assert "tidy" in first
    skill_md = tmp_path / ".neta" / "skills" / "tidy" / "SKILL.md"
    skill_md.write_text(skill_md.read_text().replace(first["tidy"], "Tidy a frame, edited"))
    assert dict(skill_catalogue(tmp_path))["tidy"] == "Tidy a frame, edited"
    make_skill(tmp_path, "plot", "print('plot')")
    assert "plot" in dict(skill_catalogue(tmp_path))
    skill_md.write_text("---\nname: tidy\n---\nno entry any more\n")
    assert "tidy" not in dict(skill_catalogue(tmp_path))
    (tmp_path / ".neta" / "skills" / "plot" / "SKILL.md").unlink()
    assert "plot" not in dict(skill_catalogue(tmp_path))
