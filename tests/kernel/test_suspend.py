"""``%neta suspend`` and ``%neta resume`` in a real kernel."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.kernel.test_embedded import kernel
from tests.kernel.test_magics import LAST, STARTED_ID

pytestmark = pytest.mark.timeout(120)

OUTCOME = (
    LAST + "await _last.wait(60)\n"
    "print(__import__('json').dumps([_last.status, _last.events[-1]['data'], _last.text]))"
)


SENT = """
import asyncio
await asyncio.wait_for(
    asyncio.gather(*[t for t in asyncio.all_tasks() if t.get_name() == "neta-suspend"]), 30
)
print("sent")
"""
"""Until what ``%neta suspend`` asked for has reached the runtime."""

GATE_SKILL = """\
import json, os, pathlib, time
gate = pathlib.Path(os.environ["NETA_ROOT_DIR"]) / "gate"
while not gate.exists():
    time.sleep(0.05)
print(json.dumps({"type": "result", "output": "the gate opened"}))
"""


async def test_suspend_pauses_the_run_after_its_step_and_resume_completes_it(
    tmp_path: Path,
) -> None:
    skill = tmp_path / ".neta" / "skills" / "wait_gate"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: wait_gate\ndescription: waits for a file\nentry: {python} main.py\n---\n"
    )
    (skill / "main.py").write_text(GATE_SKILL)
    script = tmp_path / "gated.json"
    call = {"name": "run_skill", "arguments": {"name": "wait_gate"}}
    script.write_text(json.dumps({"turns": [{"toolCalls": [call]}, {"text": "All listed."}]}))
    async with kernel(tmp_path) as k:
        await k.run("%load_ext neta_jupyter")
        await k.run(f"%neta --model scripted:{script} --approve auto wait for the gate")
        rid = await k.json(STARTED_ID)
        assert rid.startswith("r_")
        assert f"pausing {rid}" in await k.stdout("%neta suspend")
        assert "sent" in await k.stdout(SENT, timeout=40)
        (tmp_path / "gate").write_text("")
        status, data, _ = await k.json(OUTCOME, timeout=70)
        assert status == "suspended"
        assert data["suspendReason"]["type"] == "MANUAL_SUSPEND"
        assert f"resuming {rid}" in await k.stdout(f"%neta resume {rid}")
        status, data, text = await k.json(OUTCOME, timeout=70)
        assert status == "completed" and text.endswith("All listed.")
