"""What the side panel's browser tests share: a server whose pages load the panel under test,
and the panel opened as a user opens it (its keyboard shortcut)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import neta_jupyter
from benchmarks.b6_lab import open_notebook
from tests.server_process import ServerProcess

LABEXTENSION = Path(neta_jupyter.__file__).parent / "labextension"
"""The prebuilt extension of the package under test (``cd js && npm run build`` makes it)."""

PANEL = "[data-testid=neta-panel]"
FOLLOWED = "[data-testid=neta-panel-followed-view] [data-testid=neta-run]"


def panel_server(tmp_path: Path, neta_config: dict[str, Any] | None = None) -> ServerProcess:
    """A JupyterLab server whose pages load this package's panel, wherever it is installed.

    The package under test may not be the one installed in the environment (a checkout beside
    it): its extension is put first on the server's Jupyter path.
    """
    assert (LABEXTENSION / "package.json").exists(), "build the panel first: cd js && npm run build"
    path = tmp_path / "jupyter-path"
    (path / "labextensions").mkdir(parents=True)
    (path / "labextensions" / "neta-jupyter").symlink_to(LABEXTENSION)
    server = ServerProcess(tmp_path, neta_config, app="jupyterlab")
    server.env["JUPYTER_PATH"] = str(path)
    # JupyterLab's question about its news is a toast over the bottom of the side panel.
    settings = tmp_path / "lab-settings"
    news = settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    news.parent.mkdir(parents=True)
    news.write_text('{"fetchNews": "false"}')
    server.env["JUPYTERLAB_SETTINGS_DIR"] = str(settings)
    return server


def open_panel(page: Any) -> Any:
    """Alt+Shift+A (the panel's shortcut) opens the panel and puts the cursor in its prompt."""
    page.wait_for_selector("#main", timeout=90_000)
    page.locator("body").press("Alt+Shift+A")
    panel = page.locator(PANEL)
    panel.wait_for(state="visible", timeout=60_000)
    page.wait_for_function(
        "document.activeElement?.dataset?.testid === 'neta-panel-prompt'", timeout=30_000
    )
    return panel


def run_row(page: Any, origin: str, text: str) -> Any:
    """The panel's row of the run from ``origin`` whose prompt holds ``text``."""
    return page.locator(f"[data-testid=neta-panel-run][data-origin={origin}]:has-text({text!r})")


def open_in(browser: Any, lab: ServerProcess, app: str, name: str) -> Any:
    """The notebook open in JupyterLab or in Notebook 7, its kernel ready."""
    if app == "lab":
        return open_notebook(browser, lab, name)
    page = browser.new_page(viewport={"width": 1300, "height": 1000})
    page.goto(f"{lab.url}notebooks/{name}?token={lab.token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status=idle]", timeout=90_000)
    return page
