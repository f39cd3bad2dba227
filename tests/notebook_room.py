"""A collaboration-room client for the tests: it joins a notebook's room as JupyterLab does."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import nbformat
import websockets
from jupyter_ydoc import YNotebook
from pycrdt import Provider
from websockets.exceptions import ConnectionClosed

ROOM_CONFIG = {
    "jpserver_extensions": {
        "neta_jupyter": True,
        "jupyter_server_ydoc": True,
        "jupyter_server_fileid": True,
    }
}


def collaboration_config(root: Path, data: Path) -> dict[str, Any]:
    """Server config with the collaboration extension (rooms save the file quickly)."""
    return {
        "ServerApp": ROOM_CONFIG,
        "NetaApp": {
            "data_dir": str(data / "neta-data"),
            "demo_pace": 0.0,
            "scripted_models_dir": str(data),
        },
        "SQLiteYStore": {"db_path": str(data / "rtc.db")},
        "BaseFileIdManager": {
            "root_dir": str(root),
            "db_path": str(data / "fid.db"),
            "db_journal_mode": "OFF",
        },
        "YDocExtension": {"document_save_delay": 0.2, "document_cleanup_delay": 60},
    }


def write_notebook(path: Path, *cells: tuple[str, str]) -> list[str]:
    """A notebook of ``(cell_type, source)`` cells; their ids."""
    nb = nbformat.v4.new_notebook()
    for kind, source in cells:
        maker = nbformat.v4.new_code_cell if kind == "code" else nbformat.v4.new_markdown_cell
        nb.cells.append(maker(source))
    path.write_text(nbformat.writes(nb))
    return [c.id for c in nb.cells]


class _Channel:
    """pycrdt's ``Channel`` over a ``websockets`` connection."""

    def __init__(self, ws: Any, path: str) -> None:
        self._ws = ws
        self._path = path

    @property
    def path(self) -> str:
        return self._path

    def __aiter__(self) -> _Channel:
        return self

    async def __anext__(self) -> bytes:
        try:
            return await self.recv()
        except ConnectionClosed:
            raise StopAsyncIteration from None

    async def send(self, message: bytes) -> None:
        await self._ws.send(message)

    async def recv(self) -> bytes:
        return bytes(await self._ws.recv())


@asynccontextmanager
async def joined(
    http: Any, server_url: str, headers: dict[str, str], path: str
) -> AsyncIterator[YNotebook]:
    """The notebook's shared document, synced with its room for as long as the block runs."""
    response = await http.put(
        f"api/collaboration/session/{path}", json={"format": "json", "type": "notebook"}
    )
    assert response.status_code in (200, 201), response.text
    session = response.json()
    room = f"{session['format']}:{session['type']}:{session['fileId']}"
    url = server_url.replace("http", "ws", 1) + f"api/collaboration/room/{room}"
    notebook = YNotebook()
    async with (
        websockets.connect(
            f"{url}?sessionId={session['sessionId']}", additional_headers=headers
        ) as ws,
        Provider(notebook.ydoc, _Channel(ws, room)),
    ):
        await until(lambda: notebook.cell_number > 0, "the room never synced")
        yield notebook


async def until(condition: Callable[[], bool], why: str, seconds: float = 20.0) -> None:
    """Wait for ``condition`` (a hang fails with ``why``)."""
    for _ in range(int(seconds / 0.05)):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(why)


def cell_by_id(notebook: YNotebook, cell_id: str) -> dict[str, Any] | None:
    """The shared document's cell with this id."""
    for index in range(notebook.cell_number):
        cell = notebook.ycells[index].to_py()
        if cell.get("id") == cell_id:
            return dict(cell)
    return None


def saved_cells(path: Path) -> list[dict[str, Any]]:
    """The cells of the file on disk (sources joined into one string)."""
    cells = json.loads(path.read_text())["cells"]
    for cell in cells:
        if isinstance(cell["source"], list):
            cell["source"] = "".join(cell["source"])
    return list(cells)
