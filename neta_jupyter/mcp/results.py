"""What an MCP tool call gives, as a neta :class:`ToolResult`: text, structure, images, files."""

from __future__ import annotations

import base64
import binascii
import json
import mimetypes
from pathlib import PurePosixPath
from typing import Any

from mcp import types

from ..tools.filenames import safe_name
from ..tools.values import ToolError, ToolFile, ToolResult


def tool_result(remote: str, result: types.CallToolResult) -> ToolResult:
    """The result for the model and the user; an ``isError`` result is a :class:`ToolError`."""
    texts: list[str] = []
    out = ToolResult("")
    for index, block in enumerate(result.content, start=1):
        texts.append(_block(remote, index, block, out))
    text = "\n".join(t for t in texts if t)
    if result.is_error:
        raise ToolError(text or f"{remote} reported an error without a message")
    structured = result.structured_content
    if structured is not None and not any(isinstance(b, types.TextContent) for b in result.content):
        text = "\n".join(t for t in (text, _json(structured)) if t)
    out.output = text or "(the tool returned nothing)"
    return out


def _block(remote: str, index: int, block: Any, out: ToolResult) -> str:
    """One content block: its text for the model, its bytes kept in ``out``."""
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent):
        name = f"{remote}-{index}{_extension(block.mime_type)}"
        out.images.append(ToolFile(name, _decode(block.data), block.mime_type))
        return f"[image: {name}]"
    if isinstance(block, types.AudioContent):
        name = f"{remote}-{index}{_extension(block.mime_type)}"
        out.files.append(ToolFile(name, _decode(block.data), block.mime_type))
        return f"[audio: {name}, attached]"
    if isinstance(block, types.EmbeddedResource):
        return _resource(remote, index, block.resource, out)
    if isinstance(block, types.ResourceLink):
        return f"[resource: {block.uri} ({block.name})]"
    return f"[{getattr(block, 'type', 'unknown')} content]"


def _resource(
    remote: str,
    index: int,
    resource: types.TextResourceContents | types.BlobResourceContents,
    out: ToolResult,
) -> str:
    """A text resource is read inline; a binary one becomes an attachment."""
    uri = str(resource.uri)
    if isinstance(resource, types.TextResourceContents):
        return f"[resource {uri}]\n{resource.text}"
    mime = resource.mime_type or "application/octet-stream"
    stem = safe_name(PurePosixPath(uri.split("?", 1)[0]).name, f"{remote}-{index}")
    name = stem if "." in stem else f"{stem}{_extension(mime)}"
    out.files.append(ToolFile(name, _decode(resource.blob), mime))
    return f"[resource {uri}: attached as {name}]"


def _decode(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ToolError(f"the server sent content that is not valid base64: {exc}") from exc


def _extension(mime: str) -> str:
    return mimetypes.guess_extension(mime) or ".bin"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=1)
