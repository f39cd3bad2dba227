"""What the run API's transports read of a runtime's records, each read checked against its owner.

The server's handlers, the client's in-process transport and the local hosts (the embedded kernel,
the terminal) read through these instead of opening the runtime's store, so a record reaches only
the principal it belongs to, and the store stays the runtime's own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..tools.notebook_doc import NotebookEdit
from .answers import session_snapshot
from .context.attachments import upload
from .errors import RunNotFound

if TYPE_CHECKING:
    from ..store import AttachmentRecord, SessionRecord
    from .data.runs import Run
    from .manager import Runtime

__all__ = [
    "attachment",
    "notebook_edit",
    "notebook_edits",
    "sessions",
    "settle",
    "tree_now",
    "upload_file",
]


async def sessions(runtime: Runtime, principal: str) -> list[SessionRecord]:
    """The principal's sessions, newest first."""
    return await runtime.store.records.sessions(principal)


async def settle(runtime: Runtime) -> None:
    """Wait until every event appended so far is durable (and so readable by a follower)."""
    await runtime.store.events.flush()


async def tree_now(runtime: Runtime, principal: str, session_id: str) -> dict[str, Any]:
    """The session's tree as :func:`session_snapshot` answers it, once the appended is durable.

    Its ``lastSeq`` is then the last event a follower could read, so following from it repeats
    the fewest changes the tree already shows.
    """
    await settle(runtime)
    return await session_snapshot(runtime, principal, session_id)


async def attachment(
    runtime: Runtime, principal: str, virtual_path: str
) -> AttachmentRecord | None:
    """The principal's attachment at ``virtual_path``; ``None`` when there is none of theirs."""
    record = await runtime.store.records.get_attachment(virtual_path)
    return record if record is not None and record.principal == principal else None


async def upload_file(
    runtime: Runtime, principal: str, file_name: str, content: bytes, content_type: str | None
) -> dict[str, Any]:
    """Store a file the principal attaches to later runs; the attachment, as the run API answers."""
    return await upload(
        runtime.store,
        runtime.config,
        principal=principal,
        file_name=file_name,
        content=content,
        content_type=content_type,
    )


async def notebook_edits(runtime: Runtime, run: Run) -> list[NotebookEdit]:
    """The notebook edits of ``run`` (one the caller got for its principal), oldest first."""
    return [
        NotebookEdit.from_json(e)
        for e in await runtime.store.records.notebook_edits(run.request_id)
    ]


async def notebook_edit(runtime: Runtime, principal: str, edit_id: str) -> NotebookEdit | None:
    """The notebook edit ``edit_id`` of one of the principal's runs; ``None`` otherwise."""
    found = await runtime.store.records.get_notebook_edit(edit_id)
    if found is None:
        return None
    edit = NotebookEdit.from_json(found)
    try:
        await runtime.get_run(principal, edit.request_id)
    except RunNotFound:
        return None
    return edit
