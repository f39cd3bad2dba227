"""Files a user attaches to a prompt: uploads, URLs the server imports, and what the model sees.

An upload is stored for its user before any run starts (virtual path ``uploads/<attachmentId>``)
and a run request names it by id; a URL is downloaded when the run begins (an ``ImportAttachments``
step announced by AGENT_STATUS ``IMPORTING_ATTACHMENTS``) and stored the same way. The run's
user entry lists its attachments (``attachments``); each model request shows them with that
message: text inline (head and tail of a long file), pictures as images when the model takes
them, anything else as a note naming the file.
"""

from __future__ import annotations

import asyncio
import mimetypes
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import unquote, urlsplit

from ...events import AttachmentData, EventType, StatusCode
from ...events.redact import Redactor
from ...providers.base import Image
from ...providers.images import ImageLimits, fit, labelled
from ...store import AttachmentRecord, RecordStore, new_id
from ...tools.filenames import safe_name
from ..config import RuntimeConfig, UploadQuota
from ..data.values import AttachmentRef
from ..errors import BadRunRequest, RunApiError, RunNotFound
from ..log.emitter import RunEmitter, status
from .fetch import AddressPolicy, ImportFailed, download
from .uploads import QuotaExceeded, room_for, user_folder

if TYPE_CHECKING:
    from ...store import Store
    from ..data.runs import Run
    from ..log.tree import SessionTree

ENTRY_KEY = "attachments"
"""Where a user entry's message lists its attachments."""
MAX_INLINE_CHARS = 20_000
"""Characters of an attached text file shown to the model (head and tail of a longer one)."""
UPLOADS = "uploads"
_TEXT_TYPES = ("application/json", "application/xml", "application/javascript", "application/csv")
_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
"""The pictures vendors take as image input."""


class AttachmentTooLarge(RunApiError):
    """An upload over ``max_attachment_bytes``."""

    status = 413
    code = "ATTACHMENT_TOO_LARGE"


def guess_type(name: str) -> str:
    """The MIME type a file name suggests."""
    return mimetypes.guess_type(name)[0] or "application/octet-stream"


def entry_item(record: AttachmentRecord) -> dict[str, Any]:
    """What a user entry keeps of one of its attachments."""
    return {
        "attachmentId": record.attachment_id,
        "fileName": record.file_name,
        "contentType": record.content_type,
        "fileSize": record.file_size,
        "virtualPath": record.virtual_path,
    }


def attachment_data(
    record: AttachmentRecord,
    *,
    source: Literal["USER_UPLOAD", "AGENT_GENERATED"],
    updated: bool = False,
    message_id: str | None = None,
) -> AttachmentData:
    """The ``attachment`` data of an ATTACHMENT_* event about ``record``."""
    return AttachmentData(
        attachment_id=record.attachment_id,
        session_id=record.session_id,
        message_id=message_id,
        file_name=record.file_name,
        file_extension=Path(record.file_name).suffix.lstrip("."),
        content_type=record.content_type,
        file_size=record.file_size,
        virtual_path=record.virtual_path,
        source=source,
        change_type="UPDATED" if updated else "CREATED",
    )


async def save_upload(
    records: RecordStore,
    redactor: Redactor,
    directory: Path,
    *,
    principal: str,
    file_name: str,
    content: bytes,
    content_type: str | None,
    session_id: str = "",
    request_id: str = "",
    quota: UploadQuota | None = None,
) -> AttachmentRecord:
    """Store a file the user attached; only ``principal`` can download or attach it.

    Within ``quota`` (:class:`QuotaExceeded` otherwise), after the user's expired uploads go.
    """
    attachment_id = new_id("att")
    name = safe_name(file_name)
    folder = user_folder(directory / UPLOADS, principal)
    disk = folder / attachment_id / name
    # The model reads it and the user downloads it: known secrets are cut from it like from
    # every event.
    data = redactor.data(content)

    def write() -> None:
        disk.parent.mkdir(parents=True, exist_ok=True)
        disk.write_bytes(data)

    async with room_for(folder, len(data), quota or UploadQuota(bytes=0, retention=0)):
        await asyncio.to_thread(write)
    kind = (content_type or "").split(";")[0].strip()
    record = AttachmentRecord(
        attachment_id,
        principal,
        session_id,
        request_id,
        f"{UPLOADS}/{attachment_id}",
        name,
        kind if kind and kind != "application/octet-stream" else guess_type(name),
        len(data),
        str(disk),
    )
    await records.add_attachment(record)
    return record


async def upload(
    store: Store,
    config: RuntimeConfig,
    *,
    principal: str,
    file_name: str,
    content: bytes,
    content_type: str | None,
) -> dict[str, Any]:
    """``POST …/attachment/upload`` as the run API answers it: the stored attachment's data."""
    if len(content) > config.max_attachment_bytes:
        raise too_large(config)
    record = await save_upload(
        store.records,
        store.redactor,
        config.attachments_dir,
        principal=principal,
        file_name=file_name,
        content=content,
        content_type=content_type,
        quota=config.upload_quota,
    )
    return attachment_data(record, source="USER_UPLOAD").model_dump(mode="json", by_alias=True)


def too_large(config: RuntimeConfig) -> AttachmentTooLarge:
    """The refusal of an upload over the limit."""
    limit = config.max_attachment_bytes
    return AttachmentTooLarge(f"the file is over the limit of {limit:,} bytes for an attachment")


async def uploaded(
    records: RecordStore, principal: str, refs: list[AttachmentRef]
) -> list[AttachmentRecord]:
    """The principal's uploads the refs name; RunNotFound (``ATTACHMENT_NOT_FOUND``) otherwise."""
    found = []
    for ref in refs:
        if ref.attachment_id is None:
            continue
        record = await records.get_attachment(f"{UPLOADS}/{ref.attachment_id}")
        if record is None or record.principal != principal:
            raise RunNotFound(
                f"no uploaded attachment with id {ref.attachment_id!r}; upload the file first",
                code="ATTACHMENT_NOT_FOUND",
            )
        found.append(record)
    return found


async def requested(
    records: RecordStore, principal: str, raw: list[dict[str, Any]] | None
) -> tuple[list[dict[str, Any]], list[AttachmentRef]]:
    """What a run request attaches: its uploads as entry items, and the URLs to import.

    BadRunRequest (``INVALID_ATTACHMENT``) for a malformed one, RunNotFound
    (``ATTACHMENT_NOT_FOUND``) for an upload the principal does not have.
    """
    refs = []
    for position, item in enumerate(raw or []):
        try:
            refs.append(AttachmentRef.model_validate(item))
        except ValueError as exc:
            raise BadRunRequest(
                f"attachments[{position}]: {exc}", code="INVALID_ATTACHMENT"
            ) from exc
    items = [entry_item(r) for r in await uploaded(records, principal, refs)]
    return items, [r for r in refs if r.url is not None]


async def import_urls(
    refs: list[AttachmentRef],
    *,
    run: Run,
    records: RecordStore,
    tree: SessionTree,
    emitter: RunEmitter,
    config: RuntimeConfig,
) -> None:
    """Download the run's attached URLs and add them to its user entry (ImportFailed if one fails).

    The entry changes only once every URL is in: a retry imports them all again.
    """
    count = len(refs)
    noun = "attachment" if count == 1 else "attachments"
    await status(
        emitter, StatusCode.IMPORTING_ATTACHMENTS, f"Importing {count} {noun}…", count=count
    )
    stored = []
    for ref in refs:
        url = ref.url or ""
        data, kind = await download(
            url,
            limit=config.max_attachment_bytes,
            timeout=config.attachment_import_timeout,
            policy=AddressPolicy.from_allowlist(config.url_allowlist),
        )
        try:
            saved = await save_upload(
                records,
                emitter.redactor,
                config.attachments_dir,
                principal=run.principal,
                file_name=url_file_name(ref),
                content=data,
                content_type=kind,
                session_id=run.session_id,
                request_id=run.request_id,
                quota=config.upload_quota,
            )
        except QuotaExceeded as exc:
            raise ImportFailed(url, exc.message, transient=False) from exc
        stored.append(saved)
    entry = await records.get_entry(run.state.leaf or "")
    if entry is not None and entry.role == "user":
        items = [*(entry.message.get(ENTRY_KEY) or []), *(entry_item(r) for r in stored)]
        await tree.update(entry, {**entry.message, ENTRY_KEY: items}, run=emitter)
    announce(emitter, [entry_item(r) for r in stored], run.session_id)


def announce(emitter: RunEmitter, items: list[dict[str, Any]], session_id: str) -> None:
    """ATTACHMENT_CHANGED (``source`` USER_UPLOAD) for each file the user attached.

    Clients list them with the run's other files.
    """
    for item in items:
        name = str(item["fileName"])
        emitter.emit(
            EventType.ATTACHMENT_CHANGED,
            AttachmentData(
                attachment_id=item["attachmentId"],
                session_id=session_id,
                file_name=name,
                file_extension=Path(name).suffix.lstrip("."),
                content_type=item["contentType"],
                file_size=item["fileSize"],
                virtual_path=item["virtualPath"],
                source="USER_UPLOAD",
            ),
        )


def url_file_name(ref: AttachmentRef) -> str:
    """The name a URL's file is stored under."""
    if ref.file_name:
        return safe_name(ref.file_name)
    return safe_name(unquote(urlsplit(ref.url or "").path.rstrip("/").rpartition("/")[2]))


class Shown:
    """What the model is shown of attachments, read from disk once per run activation."""

    def __init__(
        self, records: RecordStore, *, images: bool, limits: ImageLimits | None = None
    ) -> None:
        self._records = records
        self._images = images
        self._limits = limits or ImageLimits()
        self._seen: dict[str, tuple[str, Image | None]] = {}

    async def of(self, items: list[dict[str, Any]]) -> tuple[str, list[Image]]:
        """The text to add to the user's message, and its images."""
        texts, images = [], []
        for item in items:
            text, image = await self._one(item)
            texts.append(text)
            if image is not None:
                images.append(image)
        return "\n\n".join(texts), images

    async def _one(self, item: dict[str, Any]) -> tuple[str, Image | None]:
        path = str(item.get("virtualPath", ""))
        if path not in self._seen:
            record = await self._records.get_attachment(path)
            self._seen[path] = await asyncio.to_thread(self._read, item, record)
        return self._seen[path]

    def _read(
        self, item: dict[str, Any], record: AttachmentRecord | None
    ) -> tuple[str, Image | None]:
        name = str(item.get("fileName", "file"))
        kind = str(item.get("contentType", ""))
        label = f"[Attached file {name} ({kind}, {int(item.get('fileSize', 0)):,} bytes)]"
        try:
            data = Path(record.disk_path).read_bytes() if record is not None else None
        except OSError:
            data = None
        if data is None:
            return f"{label}\n(the file is no longer stored)", None
        if kind in _IMAGE_TYPES:
            if not self._images:
                return f"{label}\n(an image; this model cannot be shown images)", None
            original = Image(kind, data)
            if (fitted := fit(original, self._limits).image) is not None:
                return f"{label} (shown as an image)", labelled(name, original, fitted)
            return f"{label}\n(an image that could not be read; it is not shown)", None
        if kind.startswith("text/") or kind in _TEXT_TYPES or _looks_like_text(data):
            return f"{label}\n```\n{_inline(data.decode('utf-8', errors='replace'))}\n```", None
        return f"{label}\n(a binary file; its content is not shown)", None


def _inline(text: str) -> str:
    """The text, or the beginning and end of a long one with a note of what is left out."""
    if len(text) <= MAX_INLINE_CHARS:
        return text
    head, tail = text[: MAX_INLINE_CHARS * 3 // 4], text[-MAX_INLINE_CHARS // 4 :]
    left_out = len(text) - len(head) - len(tail)
    note = (
        f"… [{left_out:,} characters of this attachment are not shown: it has {len(text):,} "
        f"characters in {text.count(chr(10)) + 1:,} lines; ask the user for the part you need] …"
    )
    return f"{head}\n{note}\n{tail}"


def _looks_like_text(data: bytes) -> bool:
    head = data[:4096]
    if b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start > len(head) - 4  # a character cut at the end of the sample
    return True
