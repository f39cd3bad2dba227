"""Execute the demo notebooks for the docs: offline demo model, approvals automatic, no server.

The workspace notebook is the exception: ``run_workspace.py`` runs it on a server.

Each notebook in ``notebooks/`` is copied to a scratch folder and executed there with nbclient,
as ``tests/notebooks/test_demo_notebooks.py`` does; the executed copy is written to
``docs/notebooks/`` (ignored by git), so the tracked notebooks are never modified. Without a
Jupyter server the runtime runs embedded in the kernel; a hidden last cell waits for the runs to
come to rest, so each cell's saved output holds its whole run (the widget's transcript, and the
widget's state).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient
from run_workspace import render_workspace

WAIT_FOR_RUNS = """\
import asyncio
import neta_jupyter.kernel as _neta
_ctx = _neta.current_context()
await asyncio.gather(*(h.wait(180) for h in _ctx.launched))
"""

# Notebooks whose tools need a Jupyter server: run on one, in a thread of their own.
NEEDS_SERVER = frozenset({"workspace.ipynb"})
# The demo model streams at full speed: the pages show what it wrote, not how fast.
ENVIRONMENT = {"NETA_APPROVE": "auto", "MPLBACKEND": "agg", "NETA_DEMO_PACE": "0"}
CONCURRENCY = 3
NO_SERVER = ("NETA_SERVER_URL", "NETA_KERNEL_TOKEN", "NETA_SERVER_PID")


@contextmanager
def demo_environment() -> Iterator[None]:
    """The kernel's environment for the duration of the execution, then the old one back."""
    saved = {k: os.environ.get(k) for k in (*ENVIRONMENT, *NO_SERVER)}
    os.environ.update(ENVIRONMENT)
    for key in NO_SERVER:
        os.environ.pop(key, None)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


async def execute(source: Path, target: Path) -> None:
    """Run ``source`` in a scratch folder and save the executed copy as ``target``."""
    if source.name in NEEDS_SERVER:
        await asyncio.to_thread(render_workspace, source, target)
        return
    nb = nbformat.read(source, as_version=4)
    wait = nbformat.v4.new_code_cell(WAIT_FOR_RUNS)
    wait.metadata["tags"] = ["remove-cell"]
    nb.cells.append(wait)
    with tempfile.TemporaryDirectory(prefix="neta-docs-") as workdir:
        shutil.copy(source, Path(workdir) / source.name)
        client = NotebookClient(
            nb,
            timeout=300,
            kernel_name="python3",
            store_widget_state=True,
            skip_cells_with_tag="needs-api-key",
            resources={"metadata": {"path": workdir}},
        )
        await client.async_execute()
    nbformat.write(nb, target)


async def execute_some(jobs: list[tuple[Path, Path]], log: Any) -> None:
    """The notebooks a few at a time: most of each one's time is waiting for its kernel.

    Those that run on a server go first: they take longest (the server starts, then they run).
    """
    slots = asyncio.Semaphore(CONCURRENCY)
    jobs = sorted(jobs, key=lambda job: job[0].name not in NEEDS_SERVER)

    async def one(source: Path, target: Path) -> None:
        async with slots:
            started = time.monotonic()
            await execute(source, target)
            log.info(f"executed {source.name} in {time.monotonic() - started:.1f} s")

    await asyncio.gather(*(one(source, target) for source, target in jobs))


def execute_all(source_dir: Path, target_dir: Path, log: Any) -> None:
    """Every notebook of ``source_dir`` into ``target_dir``; ``log`` is Sphinx's logger."""
    target_dir.mkdir(parents=True, exist_ok=True)
    reuse = os.environ.get("NETA_DOCS_REUSE_NOTEBOOKS") == "1"
    jobs = []
    for source in sorted(source_dir.glob("*.ipynb")):
        target = target_dir / source.name
        if reuse and target.exists() and target.stat().st_mtime >= source.stat().st_mtime:
            continue
        jobs.append((source, target))
    with demo_environment():
        asyncio.run(execute_some(jobs, log))
