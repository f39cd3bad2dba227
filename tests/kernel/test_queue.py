"""Prompts of one conversation go in turn: a queued prompt waits for the one before to *finish*.

A run that waits for the user (an approval) holds the prompts behind it; none of them ends it
("Run All" used to supersede every run that asked). ``%neta undo`` takes its turn too, and
finding nothing to undo is a note that lets the cells after it run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.kernel.test_embedded import kernel

pytestmark = pytest.mark.timeout(120)

HANDLES = (
    "import json\nfrom neta_jupyter.kernel import current_context as _cc\n_h = _cc().launched\n"
)
UNTIL = """
import asyncio
for _ in range(1500):  # half a minute at most
    if {condition}:
        break
    await asyncio.sleep(0.02)
"""


def scripts(tmp_path: Path) -> tuple[Path, Path]:
    asks = tmp_path / "asks.json"
    call = {"toolCalls": [{"name": "python", "arguments": {"code": "print(17 * 23)"}}]}
    asks.write_text(json.dumps({"turns": [call, {"text": "it is 391"}]}))
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"turns": [{"text": "second answer"}]}))
    return asks, plain


async def test_a_queued_prompt_waits_for_the_approval_above_and_never_cancels_it(
    tmp_path: Path,
) -> None:
    asks, plain = scripts(tmp_path)
    async with kernel(tmp_path, {"NETA_APPROVE": "ask"}) as k:
        await k.run("%load_ext neta_jupyter")
        # As Run All sends them: both cells at once, in one conversation.
        await k.run(
            f"%neta --model scripted:{asks} compute it\n%neta --model scripted:{plain} next"
        )
        await k.run(HANDLES + UNTIL.format(condition="_h[0].status == 'suspended'"), timeout=40)
        # Long enough for a supersede to have happened, had the queue gone on at the first rest.
        await k.run("import asyncio\nawait asyncio.sleep(1)")
        state = await k.json(
            HANDLES + "print(json.dumps([[h.status, h.waiting, h.widget.waiting] for h in _h]))"
        )
        (first, first_waiting, _), (second, waiting, shown) = state
        assert (first, first_waiting) == ("suspended", "")
        assert second == "queued"
        assert waiting.startswith("Waiting for the prompt above: it needs your approval.")
        assert "--new" in waiting and shown == waiting, "the widget says what it waits for"

        # Awaiting the queued prompt returns: it waits for the user, like the run above it.
        assert await k.json(HANDLES + "await _h[1].wait(30)\nprint(json.dumps(_h[1].status))") == (
            "queued"
        )

        await k.run(HANDLES + "await _h[0].approve()")
        await k.run(HANDLES + UNTIL.format(condition="_h[1].status == 'completed'"), timeout=40)
        final = await k.json(
            HANDLES + "print(json.dumps([[h.status, h.text, h.waiting, h.widget.waiting] "
            "for h in _h]))"
        )
    assert final == [["completed", "it is 391", "", ""], ["completed", "second answer", "", ""]]


async def test_a_prompt_typed_while_a_run_waits_queues_and_stop_takes_it_out(
    tmp_path: Path,
) -> None:
    asks, plain = scripts(tmp_path)
    async with kernel(tmp_path, {"NETA_APPROVE": "ask"}) as k:
        await k.run(f"%load_ext neta_jupyter\n%neta --model scripted:{asks} compute it")
        await k.run(HANDLES + UNTIL.format(condition="_h[0].status == 'suspended'"), timeout=40)
        # Typed by hand later, while the run above waits for its approval.
        await k.run(f"%neta --model scripted:{plain} by hand")
        status = await k.stdout("%neta status")
        assert "'by hand': queued" in status and "needs your approval" in status, status
        assert "will not run" in await k.stdout("%neta stop")
        state = await k.json(HANDLES + "print(json.dumps([[h.status, h.error] for h in _h]))")
        assert state[0] == ["suspended", None], "the run above still waits for its approval"
        assert state[1] == ["failed", "stopped before it started (it was queued)"]
        # With --new it goes ahead in a conversation of its own.
        await k.run(f"%neta --new --model scripted:{plain} fresh")
        await k.run(HANDLES + UNTIL.format(condition="_h[2].status == 'completed'"), timeout=40)
        assert await k.json(HANDLES + "print(json.dumps(_h[0].status))") == "suspended"


async def test_undo_with_nothing_to_undo_is_a_note_and_takes_its_turn(tmp_path: Path) -> None:
    asks, _ = scripts(tmp_path)
    env = {"NETA_APPROVE": "ask", "JPY_SESSION_NAME": str(tmp_path / "analysis.ipynb")}
    async with kernel(tmp_path, env) as k:
        await k.run("%load_ext neta_jupyter")
        # Nothing to undo: a note, and the rest of the cell runs (Run All goes on).
        out = await k.stdout("%neta undo\nprint('after the undo')")
        assert out.startswith("nothing to undo: ") and "after the undo" in out, out
        # The same for every subcommand with nothing to act on yet.
        out = await k.stdout("%neta stop\n%neta suspend\n%neta resume\n%neta status\nprint('on')")
        assert out.splitlines() == [
            "nothing to stop: no run was started from this kernel yet (or give a requestId)",
            "nothing to pause: no run was started from this kernel yet (or give a requestId)",
            "nothing to resume: no run was started from this kernel yet (or give a requestId)",
            "nothing to show: no run was started from this kernel yet (or give a requestId)",
            "on",
        ]
        # Behind a prompt that waits for its approval, the undo waits for it, and says so.
        own = await k.run(f"%neta --model scripted:{asks} compute it\n%neta undo\nprint('on')")
        await k.run(HANDLES + UNTIL.format(condition="_h[0].status == 'suspended'"), timeout=40)
        shown = [m for m in own if m["msg_type"] == "display_data"][-1]
        assert "queued" in shown["content"]["data"]["text/plain"]
        display_id = shown["content"]["transient"]["display_id"]
        waiting = await k.wait_for(
            lambda m: (
                m["msg_type"] == "update_display_data"
                and m["content"]["transient"]["display_id"] == display_id
                and "needs your approval" in m["content"]["data"]["text/plain"]
            )
        )
        assert waiting["content"]["data"]["text/plain"] == (
            "%neta undo: Waiting for the prompt above: it needs your approval."
        )
        await k.run(HANDLES + "await _h[0].approve()")
        done = await k.wait_for(
            lambda m: (
                m["msg_type"] == "update_display_data"
                and m["content"]["transient"]["display_id"] == display_id
                and "nothing to undo" in m["content"]["data"]["text/plain"]
            ),
            timeout=40,
        )
        assert done
        assert await k.json(HANDLES + "print(json.dumps(_h[0].status))") == "completed"
