"""Runs embedded in the kernel: the same runtime, on the kernel's own event loop.

Used where no Jupyter server with the extension started the kernel (VS Code, plain IPython,
``jupyter execute``). The event log is a SQLite file in a per-kernel temporary directory unless
``NETA_DATA_DIR`` names a lasting one. Settings come from the environment: ``NETA_MODEL`` (default
model), ``NETA_DEMO_PACE`` (seconds between the demo model's tokens).
"""

from __future__ import annotations

import atexit
import base64
import mimetypes
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ..client import InProcessTransport, RunClient
from ..runtime import reads
from ..runtime.settings import NetaSettings, build_runtime
from ..store import Store, finish_now
from .host import PRINCIPAL, Host, Mode
from .inprocess import InProcessKernelBridge

_MAX_INLINE_IMAGE = 5_000_000


class EmbeddedHost(Host):
    """:class:`~neta_jupyter.kernel.host.Host` with the runtime inside this kernel."""

    mode: Mode = "embedded"

    def __init__(
        self,
        shell: Any,
        *,
        data_dir: str | Path | None = None,
        root_dir: str | Path | None = None,
        environ: dict[str, str] | None = None,
    ) -> None:
        env = dict(os.environ if environ is None else environ)
        chosen = data_dir or env.get("NETA_DATA_DIR")
        self.data_dir = Path(chosen) if chosen else Path(tempfile.mkdtemp(prefix="neta-kernel-"))
        if not chosen:
            atexit.register(shutil.rmtree, self.data_dir, ignore_errors=True)
        settings = NetaSettings(
            model=env.get("NETA_MODEL") or "demo",
            demo_pace=float(env.get("NETA_DEMO_PACE") or 0.015),
            scripted_models_dir=env.get("NETA_SCRIPTED_MODELS_DIR") or "",
        )
        # A folder of one's own outlives the kernel: old runs' events go as on a server. A
        # temporary one goes with the kernel, so it needs no sweep.
        retention = settings.event_retention if chosen else 0
        self.store = Store(self.data_dir / "neta.sqlite3", event_retention=retention)
        self.bridge = InProcessKernelBridge(shell)
        self.runtime = build_runtime(
            settings,
            self.store,
            root_dir=Path(root_dir or os.getcwd()),
            data_dir=self.data_dir,
            kernels=lambda _run: self.bridge,
        )
        super().__init__(RunClient(InProcessTransport(self.runtime, PRINCIPAL)))

    def describe(self) -> dict[str, Any]:
        """Where runs go."""
        return {
            "mode": "embedded (no Jupyter server with neta_jupyter started this kernel)",
            "data dir": str(self.data_dir),
            "root dir": str(self.runtime.config.root_dir),
        }

    def image_source(self, virtual_path: str) -> str:
        """A data URL: there is no server to download from."""
        record = finish_now(reads.attachment(self.runtime, PRINCIPAL, virtual_path))
        if record is None:
            return virtual_path
        path = Path(record.disk_path)
        if not path.is_file() or path.stat().st_size > _MAX_INLINE_IMAGE:
            return virtual_path
        content_type = record.content_type or mimetypes.guess_type(path.name)[0] or "image/png"
        return f"data:{content_type};base64,{base64.b64encode(path.read_bytes()).decode()}"

    async def aclose(self) -> None:
        """Suspend what runs and close the store."""
        await super().aclose()
        await self.runtime.shutdown()
        self.store.close()
