"""The side panel is a prebuilt JupyterLab extension: JupyterLab lists it enabled and OK, with no
rebuild of JupyterLab, from the extension the package carries."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.browser.panel_lab import LABEXTENSION

ROOT = Path(__file__).parents[2]


def test_jupyterlab_lists_the_panel_enabled_and_ok(tmp_path: Path) -> None:
    assert (LABEXTENSION / "package.json").exists(), "build the panel first: cd js && npm run build"
    (tmp_path / "labextensions").mkdir()
    (tmp_path / "labextensions" / "neta-jupyter").symlink_to(LABEXTENSION)
    listed = subprocess.run(
        [sys.executable, "-m", "jupyter", "labextension", "list"],
        capture_output=True,
        text=True,
        env={**os.environ, "JUPYTER_PATH": str(tmp_path)},
        timeout=120,
    )
    lines = [
        line for line in (listed.stdout + listed.stderr).splitlines() if "neta-jupyter" in line
    ]
    assert lines and all("enabled" in line and "OK" in line for line in lines), lines


def test_the_extension_carries_its_settings_and_ships_in_the_wheel() -> None:
    built = json.loads((LABEXTENSION / "package.json").read_text())
    assert built["name"] == "neta-jupyter"
    assert built["jupyterlab"]["_build"]["load"].startswith("static/remoteEntry.")
    schema = json.loads((LABEXTENSION / "schemas" / "neta-jupyter" / "panel.json").read_text())
    assert schema["jupyter.lab.shortcuts"][0]["command"] == "neta:focus-prompt"
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"neta_jupyter/labextension" = "share/jupyter/labextensions/neta-jupyter"' in pyproject
