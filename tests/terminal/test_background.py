"""``neta-jupyter run`` follows a run that waits for code in the background until it goes on."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_helpers import cli, embedded, script, workdir

__all__ = ["workdir"]

pytestmark = pytest.mark.timeout(180)

BACKGROUND = {
    "turns": [
        {
            "toolCalls": [
                {
                    "name": "python",
                    "arguments": {
                        "code": "import time\ntime.sleep(1)\nprint('trained in the background')",
                        "background": True,
                    },
                }
            ]
        },
        {"text": "All trained."},
    ]
}


def test_the_terminal_waits_for_the_background_code_and_shows_the_rest(workdir: Path) -> None:
    model = script(workdir, BACKGROUND)
    done = cli("run", *embedded(workdir, "train", "--model", model, "--yes"), timeout=150)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    waits = out.index("the run waits for code running in the background")
    assert waits < out.index("│ trained in the background") < out.index("All trained.")
