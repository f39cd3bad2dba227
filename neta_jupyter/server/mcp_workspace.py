"""The server's notebooks and kernels as an MCP client's calls reach them, one user at a time.

A notebook is bound by its path; its kernel is the one of the notebook's session (the kernel
JupyterLab shows for it), started through the session manager when it has none. A user sees and
uses only the sessions whose kernels they started (with a single-user token, everyone holding it
is the server's owner, as for the run API).
"""

from __future__ import annotations

import posixpath
from typing import Any

from jupyter_core.utils import ensure_async

from ..notebook_mcp.session import Binding
from ..tools import ToolError
from ..tools.notebook_doc import NotebookError
from .kernels import ServerKernels
from .notebooks import ServerNotebooks, checked_path
from .principals import KernelOwners


class ServerWorkspace:
    """:class:`~neta_jupyter.notebook_mcp.session.Workspace` of a running jupyter server."""

    def __init__(
        self,
        serverapp: Any,
        notebooks: ServerNotebooks,
        kernels: ServerKernels,
        owners: KernelOwners,
    ) -> None:
        self._app = serverapp
        self._notebooks = notebooks
        self._kernels = kernels
        self._owners = owners

    async def _sessions(self, principal: str) -> list[dict[str, Any]]:
        listed = await ensure_async(self._app.session_manager.list_sessions())
        return [
            s
            for s in listed
            if s.get("type") == "notebook"
            and s.get("kernel")
            and self._owners.owner_of(s["kernel"]["id"]) == principal
        ]

    async def notebooks(self, principal: str) -> list[dict[str, Any]]:
        """The user's open notebooks and their kernels."""
        return [
            {
                "path": s["path"],
                "kernel": {
                    "id": s["kernel"]["id"],
                    "name": s["kernel"].get("name"),
                    "state": s["kernel"].get("execution_state"),
                },
            }
            for s in await self._sessions(principal)
        ]

    async def bind(self, principal: str, path: str, *, kernel: bool) -> Binding:
        """The notebook at ``path`` and, with ``kernel``, its session's kernel (started if none)."""
        try:
            clean = checked_path(self._notebooks.under_root(path))
        except NotebookError as exc:
            raise ToolError(str(exc)) from exc
        contents = self._app.contents_manager
        if not await ensure_async(contents.file_exists(clean)):
            raise ToolError(f"there is no notebook {clean} under the server root")
        host = self._notebooks.host(clean)
        if not kernel:
            return Binding(clean, host, None, None)
        kernel_id, note = await self._kernel_of(principal, clean)
        return Binding(clean, host, self._kernels.bridge(kernel_id), kernel_id, note)

    async def _kernel_of(self, principal: str, path: str) -> tuple[str, str]:
        listed = await ensure_async(self._app.session_manager.list_sessions())
        for session in listed:
            if session.get("path") != path or not session.get("kernel"):
                continue
            kernel_id = str(session["kernel"]["id"])
            if self._owners.owner_of(kernel_id) != principal:
                raise ToolError(f"the kernel of {path} belongs to another user")
            return kernel_id, ""
        model = await ensure_async(
            self._app.session_manager.create_session(
                path=path, name=posixpath.basename(path), type="notebook", kernel_name=None
            )
        )
        kernel = model["kernel"]
        self._owners.own(kernel["id"], principal)
        return str(kernel["id"]), (
            f"{path} had no kernel: started {kernel.get('name') or 'the default kernel'} "
            f"({kernel['id']}) for it"
        )
