"""The notebook and kernel a run request names, checked before the run starts.

A run bound to a notebook that is not one, or to a kernel no server runs, would start and then
quietly have no notebook or kernel tools; the caller is told instead (400 with a code).
"""

from __future__ import annotations

from typing import Any

from jupyter_core.utils import ensure_async

from ..runtime.errors import BadRunRequest
from ..store import Leases
from ..tools.notebook_doc import NotebookError
from .notebooks import ServerNotebooks, checked_path


class ServerTargets:
    """:class:`~neta_jupyter.runtime.targets.RunTargets` of a Jupyter server."""

    def __init__(self, serverapp: Any, notebooks: ServerNotebooks, leases: Leases) -> None:
        self._app = serverapp
        self._notebooks = notebooks
        self._leases = leases

    async def check(self, principal: str, kernel_id: str | None, notebook_path: str | None) -> None:
        """A ``BadRunRequest`` naming what is wrong with the request's notebook or kernel."""
        if notebook_path is not None:
            await self._notebook(notebook_path)
        if kernel_id is not None and not await self._kernel_runs(principal, kernel_id):
            raise BadRunRequest(
                f"no kernel {kernel_id!r} runs on the server", code="UNKNOWN_KERNEL"
            )

    async def _notebook(self, notebook_path: str) -> None:
        try:
            path = checked_path(self._notebooks.under_root(notebook_path))
        except (NotebookError, ValueError, OSError) as exc:
            raise BadRunRequest(
                f"notebookPath {notebook_path!r} is not a notebook (.ipynb) under the server root",
                code="INVALID_NOTEBOOK_PATH",
            ) from exc
        contents = self._app.contents_manager
        try:
            found = await ensure_async(contents.file_exists(path))
        except Exception:  # a contents manager that cannot tell: as good as absent
            found = False
        if not found:
            raise BadRunRequest(
                f"no notebook {path} under the server root", code="NOTEBOOK_NOT_FOUND"
            )

    async def _kernel_runs(self, principal: str, kernel_id: str) -> bool:
        if kernel_id in self._app.kernel_manager.list_kernel_ids():
            return True
        # Another server sharing the store may host it (its runs are handed over there).
        return (
            self._leases.shared and await self._leases.kernel_host(principal, kernel_id) is not None
        )
