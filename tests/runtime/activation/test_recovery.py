"""A model that answers right after a step whose calls all failed is asked once to retry or to
say it failed (``recover_after_failure``), so a failed-only step is followed by another step."""

from __future__ import annotations

from pathlib import Path

import pytest

from neta_jupyter.providers import ScriptedToolCall, ScriptedTurn
from neta_jupyter.runtime import Runtime
from neta_jupyter.tools import PermissionRule
from tests.helpers import ApiClient, script, types
from tests.runtime.activation.test_retries import answer, statuses

MISSING = ScriptedTurn(tool_calls=[ScriptedToolCall("read_file", {"path": "sales.txt"})])
READ = ScriptedTurn(tool_calls=[ScriptedToolCall("read_file", {"path": "sales/total.txt"})])
INVENTED = ScriptedTurn(text="The total is 5000.")


async def test_an_answer_right_after_a_failed_step_is_followed_by_another_step(
    api: ApiClient, runtime: Runtime, jp_root_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runtime.config, "recover_after_failure", True)
    (jp_root_dir / "sales").mkdir()
    (jp_root_dir / "sales" / "total.txt").write_text("total: 4321\n")
    model = script(runtime, MISSING, INVENTED, READ, ScriptedTurn(text="The total is 4321."))
    events = await api.segment(
        (await api.start("what is the total?", model="scripted"))["requestId"]
    )
    assert types(events)[-1] == "MESSAGE_COMPLETED"
    model.assert_complete()  # the model was called again after its first answer
    reminder = model.requests[2].messages[-1]
    assert reminder.role == "user" and "Your last tool call failed" in reminder.content
    assert [s["code"] for s in statuses(events)] == ["TOOL_CONSECUTIVE_FAILURES"]
    assert types(events).count("TOOL_FAILED") == 1 and types(events).count("TOOL_COMPLETED") == 1
    assert answer(events).endswith("The total is 4321.")


async def test_it_is_asked_once_and_not_after_a_denied_call_nor_when_not_configured(
    api: ApiClient, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runtime.config, "recover_after_failure", True)
    model = script(runtime, MISSING, INVENTED, MISSING, ScriptedTurn(text="It failed again."))
    events = await api.segment(
        (await api.start("what is the total?", model="scripted"))["requestId"]
    )
    assert types(events)[-1] == "MESSAGE_COMPLETED" and types(events).count("TOOL_FAILED") == 2
    model.assert_complete()  # asked once: the second answer after a failure ends the run
    rule = PermissionRule(tool="read_file", action="deny")
    monkeypatch.setattr(runtime.config, "permission_rules", [rule])
    model = script(runtime, MISSING, ScriptedTurn(text="I may not read files."))
    events = await api.segment(
        (await api.start("what is the total?", model="scripted"))["requestId"]
    )
    assert types(events)[-1] == "MESSAGE_COMPLETED" and not statuses(events)
    model.assert_complete()
    monkeypatch.setattr(runtime.config, "recover_after_failure", False)
    monkeypatch.setattr(runtime.config, "permission_rules", [])
    model = script(runtime, MISSING, INVENTED)
    events = await api.segment(
        (await api.start("what is the total?", model="scripted"))["requestId"]
    )
    assert types(events)[-1] == "MESSAGE_COMPLETED" and len(model.requests) == 2
