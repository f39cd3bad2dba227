"""``%neta suspend`` and ``%neta resume`` in a real kernel."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_kernel_embedded import kernel
from tests.test_kernel_magics import LAST, STARTED_ID

pytestmark = pytest.mark.timeout(120)

OUTCOME = (
    LAST + "await _last.wait(60)\n"
    "print(__import__('json').dumps([_last.status, _last.events[-1]['data'], _last.text]))"
)


async def test_suspend_pauses_the_run_after_its_step_and_resume_completes_it(
    tmp_path: Path,
) -> None:
    script = tmp_path / "paced.json"
    words = " ".join(f"word{i}" for i in range(30))
    first = {"text": words, "delay": 0.1, "toolCalls": [{"name": "list_files"}]}
    script.write_text(json.dumps({"turns": [first, {"text": "All listed."}]}))
    async with kernel(tmp_path) as k:
        await k.run("%load_ext neta_jupyter")
        await k.run(f"%neta --model scripted:{script} list the files, slowly")
        rid = await k.json(STARTED_ID)
        assert rid.startswith("r_")
        assert f"pausing {rid}" in await k.stdout("%neta suspend")
        status, data, _ = await k.json(OUTCOME, timeout=70)
        assert status == "suspended"
        assert data["suspendReason"]["type"] == "MANUAL_SUSPEND"
        assert f"resuming {rid}" in await k.stdout(f"%neta resume {rid}")
        status, data, text = await k.json(OUTCOME, timeout=70)
        assert status == "completed" and text.endswith("All listed.")
