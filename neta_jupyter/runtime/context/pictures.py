"""What the model is shown of the pictures its tool calls produced (figures, MCP images).

A call's pictures are stored as attachments and its history entry keeps their virtual paths
(the assistant entry's ``call_meta``), never their bytes. Each model request reads them back from
disk: a model that takes images gets them with the call's result, fitted to the size limits;
one that does not, an endpoint with ``vision: false``, gets a note naming each picture and its
size instead. A picture whose file is gone is named with a note saying so. Only the latest
pictures are sent as images; older ones are named, so a long analysis does not resend every
plot it ever drew.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...providers.base import Image
from ...providers.images import ImageLimits, describe, fit, labelled
from ...store import AttachmentRecord, Entry, RecordStore
from ..log.tree import CALL_META

DEFAULT_MAX_IMAGES = 8
"""Pictures from tool calls sent as images in one request: the latest ones."""

Shown = tuple[str, list[Image]]
"""A note to add to the call's result, and the images to show with it."""


def produced(path: list[Entry]) -> dict[str, list[str]]:
    """By tool entry id, the virtual paths of the pictures its call produced."""
    by_call: dict[str, list[str]] = {}
    for entry in path:
        if entry.role != "assistant":
            continue
        meta: Mapping[str, Any] = entry.message.get(CALL_META) or {}
        for call_id, fields in meta.items():
            if isinstance(fields, Mapping) and (paths := fields.get("images")):
                by_call[call_id] = [str(p) for p in paths]
    return {
        entry.entry_id: by_call[call_id]
        for entry in path
        if entry.role == "tool" and (call_id := str(entry.message.get("tool_call_id"))) in by_call
    }


class ToolPictures:
    """Reads, fits and describes tool pictures; each file is read once per run activation."""

    def __init__(
        self,
        records: RecordStore,
        *,
        vision: bool,
        limits: ImageLimits | None = None,
        max_images: int = DEFAULT_MAX_IMAGES,
    ) -> None:
        self._records = records
        self._vision = vision
        self._limits = limits or ImageLimits()
        self._max_images = max_images
        self._seen: dict[str, tuple[str, Image | None]] = {}

    async def shown(self, path: list[Entry]) -> dict[str, Shown]:
        """By tool entry id, what the model is shown of its call's pictures."""
        by_entry = produced(path)
        latest = [p for paths in by_entry.values() for p in paths][-self._max_images :]
        sent = set(latest) if self._vision and self._max_images > 0 else set()
        out: dict[str, Shown] = {}
        for entry_id, paths in by_entry.items():
            notes, images = [], []
            for virtual_path in paths:
                note, image = await self._one(virtual_path)
                if image is not None and virtual_path in sent:
                    images.append(image)
                else:
                    notes.append(note)
            out[entry_id] = ("\n".join(notes), images)
        return out

    async def _one(self, virtual_path: str) -> tuple[str, Image | None]:
        if virtual_path not in self._seen:
            record = await self._records.get_attachment(virtual_path)
            self._seen[virtual_path] = await asyncio.to_thread(self._read, virtual_path, record)
        return self._seen[virtual_path]

    def _read(self, virtual_path: str, record: AttachmentRecord | None) -> tuple[str, Image | None]:
        """The note naming the picture when it is not shown, and the fitted image if it can be."""
        name = record.file_name if record is not None else Path(virtual_path).name
        try:
            data = Path(record.disk_path).read_bytes() if record is not None else None
        except OSError:
            data = None
        if data is None:
            return f"[image {name}: not shown, its file is no longer stored]", None
        kind = record.content_type if record is not None else "image/png"
        what = describe(data, kind)
        if not self._vision:
            return f"[image {name}: {what}, not shown: this model does not accept images]", None
        original = Image(kind, data)
        fitted = fit(original, self._limits).image
        if fitted is None:
            return f"[image {name}: {what}, not shown: not a picture format models take]", None
        older = f"[image {name}: {what}, shown in an earlier request, not repeated here]"
        return older, labelled(name, original, fitted)
