"""REST handlers of the run API (DESIGN §5): thin wrappers over :class:`Runtime`."""

from __future__ import annotations

import asyncio
import json
import mimetypes
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from jupyter_server.auth.decorator import authorized
from tornado import httputil, web

from ..runtime import reads
from ..runtime.actions import Action
from ..runtime.context.attachments import too_large
from ..runtime.queries import Query
from .base import NetaHandler
from .errors import ApiError


class ActionHandler(NetaHandler):
    """``POST /neta/api/<route>`` of one action of the run API (``runtime.actions.ACTIONS``)."""

    def initialize(self, action: Action[Any]) -> None:
        """The action this route does."""
        self.action = action

    @web.authenticated
    @authorized
    async def post(self) -> None:
        body = self.parse_body(self.action.request)
        self.reply(await self.action.answer(self.runtime, self.principal, body))


class QueryHandler(NetaHandler):
    """``GET /neta/api/<route>`` of one query of the run API (``runtime.queries.QUERIES``)."""

    def initialize(self, query: Query) -> None:
        """The query this route answers."""
        self.run_query = query

    @web.authenticated
    @authorized
    async def get(self) -> None:
        query = self.run_query
        params = {p.name: self.query(p.name, required=p.required) or "" for p in query.params}
        if query.settles:
            await reads.settle(self.runtime)
        self.reply(await query.answer(self.runtime, self.principal, params))


class AttachmentHandler(NetaHandler):
    """``GET /neta/api/agent/attachment/download?virtualPath=``."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        virtual_path = self.query("virtualPath") or ""
        record = await reads.attachment(self.runtime, self.principal, virtual_path)
        if record is None:
            raise ApiError(404, "ATTACHMENT_NOT_FOUND", f"no attachment at {virtual_path!r}")
        path = Path(record.disk_path)
        if not await asyncio.to_thread(path.is_file):
            raise ApiError(404, "ATTACHMENT_NOT_FOUND", f"the file of {virtual_path!r} is gone")
        content_type = record.content_type or mimetypes.guess_type(record.file_name)[0]
        self.set_header("Content-Type", content_type or "application/octet-stream")
        disposition = "inline" if (content_type or "").startswith("image/") else "attachment"
        self.set_header(
            "Content-Disposition", f"{disposition}; filename*=UTF-8''{quote(record.file_name)}"
        )
        self.finish(await asyncio.to_thread(path.read_bytes))


class UploadHandler(NetaHandler):
    """``POST /neta/api/agent/attachment/upload``: a file the user attaches to later runs.

    The body is multipart/form-data (its ``file`` field, as a browser form sends it) or the raw
    bytes with ``?fileName=``; the answer is the attachment, whose ``attachmentId`` a run request
    names in ``attachments``.
    """

    _FORM_SLACK = 64 * 1024
    """Bytes a multipart body may carry beyond the file (boundaries and headers)."""

    @property
    def _body_limit(self) -> int:
        return self.runtime.config.max_attachment_bytes + self._FORM_SLACK

    def _too_large(self) -> ApiError:
        refused = too_large(self.runtime.config)
        return ApiError(refused.status, refused.code, refused.message)

    @web.authenticated
    @authorized
    async def post(self) -> None:
        if self._body_over_limit:
            raise self._too_large()
        name, content, kind = self._file()
        self.reply(await reads.upload_file(self.runtime, self.principal, name, content, kind))

    def _file(self) -> tuple[str, bytes, str | None]:
        """The uploaded file's name, bytes and content type."""
        body = b"".join(self._body)
        kind = self.request.headers.get("Content-Type", "")
        if kind.startswith("multipart/form-data"):
            files: dict[str, list[httputil.HTTPFile]] = {}
            httputil.parse_body_arguments(kind, body, {}, files, self.request.headers)
            found = files.get("file") or next(iter(files.values()), [])
            if not found:
                raise ApiError(400, "MISSING_FILE", "the form has no file (send it as 'file')")
            return found[0].filename, found[0].body, found[0].content_type
        name = self.query("fileName", required=False)
        if not name:
            raise ApiError(
                400, "MISSING_FILE_NAME", "name the file with ?fileName= (or send a form)"
            )
        return name, body, kind or None


class OpenApiHandler(NetaHandler):
    """``GET /neta/api/openapi.json``: the document of this API."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        # The document describes the route table, which names this handler: the app hands over
        # the document's builder (openapi.document) rather than this module importing it back.
        document: Callable[[str], dict[str, Any]] = self.settings["neta_openapi"]
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(document(self.base_url)))
