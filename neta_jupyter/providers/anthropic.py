"""Anthropic's Messages API, streaming: ``POST {base_url}/v1/messages`` with ``stream: true``.

The reply is a server-sent event stream of named events::

    message_start        {"message": {"usage": {"input_tokens", "cache_read_input_tokens", …}}}
    content_block_start  {"index": i, "content_block": {"type": "text" | "tool_use" | "thinking"}}
    content_block_delta  {"index": i, "delta": {"type": "text_delta" | "input_json_delta"
                                                | "thinking_delta" | "signature_delta", …}}
    content_block_stop   {"index": i}
    message_delta        {"delta": {"stop_reason"}, "usage": {"output_tokens", …}}  (cumulative)
    message_stop         the end; a stream without it was cut short
    ping                 keep-alive, ignored
    error                {"error": {"type": "overloaded_error", "message"}}

Extended thinking (``thinking_budget``) comes with a constraint: while a tool loop is open, the
assistant message that made the calls must be sent back with its thinking blocks exactly as
received, signature included. Our transcript keeps the reasoning text but not the signature, so
signed blocks are remembered in memory, keyed by the tool-use ids they preceded. When they are
not known (after a restart), that one request goes without thinking rather than failing.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import httpx
from httpx_sse import ServerSentEvent

from ._http import (
    HttpModel,
    Vendor,
    decode_json,
    error_for_payload,
    error_from_json,
    stream_cut_short,
)
from .base import (
    Image,
    Message,
    ModelRequest,
    ReasoningPart,
    StreamPart,
    TextPart,
    ThinkingLevel,
    ToolCallPart,
    ToolDefinition,
    UsagePart,
)

__all__ = ["ANTHROPIC_BASE_URL", "ANTHROPIC_VERSION", "AnthropicModel"]

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
"""Where ``anthropic:`` models are served unless ``ANTHROPIC_BASE_URL`` or the config says."""
ANTHROPIC_VERSION = "2023-06-01"
"""The ``anthropic-version`` header this translation follows."""

_SIGNED_CAPACITY = 512


class AnthropicModel(HttpModel):
    """A Claude model over the Messages API.

    ``base_url`` and ``api_key`` default to ``ANTHROPIC_BASE_URL`` and ``ANTHROPIC_API_KEY``.
    The key is sent only as ``x-api-key`` and never appears in the model's repr or its errors.
    """

    _signed: ClassVar[OrderedDict[tuple[str, ...], list[dict[str, Any]]]] = OrderedDict()
    """Thinking blocks (with signatures) of recent replies, by the ids of their tool calls."""

    def __init__(
        self,
        model_name: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: httpx.AsyncClient | None = None,
        max_tokens: int = 4096,
        thinking_budget: int | None = None,
        temperature: float | None = None,
        name: str | None = None,
        api_key_env: str = "ANTHROPIC_API_KEY",
    ) -> None:
        if thinking_budget is not None and thinking_budget < 1024:
            raise ValueError("thinking_budget must be at least 1024 tokens")
        super().__init__(
            model_name,
            base_url=base_url or os.environ.get("ANTHROPIC_BASE_URL") or ANTHROPIC_BASE_URL,
            api_key=api_key if api_key is not None else os.environ.get("ANTHROPIC_API_KEY"),
            client=client,
            name=name or f"anthropic:{model_name}",
            vendor=Vendor(name or f"anthropic:{model_name}", api_key_env),
        )
        self.max_tokens = max_tokens
        self.thinking_budget = thinking_budget
        self.temperature = temperature

    def _settings(self) -> str:
        return f", thinking_budget={self.thinking_budget!r}"

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body sent for ``request``."""
        system, messages = _messages(request, self._signed)
        max_tokens = request.max_output_tokens or self.max_tokens
        body: dict[str, Any] = {
            "model": self.model_name,
            "max_tokens": max_tokens,
            "messages": messages,
            "stream": True,
        }
        if system:
            body["system"] = system
        if request.tools:
            body["tools"] = [_tool(t) for t in request.tools]
        budget = self.thinking_budget
        if request.thinking is not None:
            budget = THINKING_BUDGETS[request.thinking]
        if budget is not None and not _unsigned_tool_loop(messages):
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
            body["max_tokens"] = max(max_tokens, budget + 1024)
        elif self.temperature is not None:  # extended thinking takes no temperature
            body["temperature"] = self.temperature
        return body

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        """Yield the parts of one reply as the events arrive."""
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        reader = EventReader(self._vendor, self._api_key)

        def parts_of(event: ServerSentEvent) -> Iterator[StreamPart]:
            if event.data:
                yield from reader.parts(event.event, decode_json(event.data, self._vendor))

        async for part in self._stream_parts(
            "/v1/messages",
            headers,
            self.request_body(request),
            lambda event: event.event in ("message_stop", "error"),
            parts_of,
        ):
            yield part
        if not reader.finished:
            raise stream_cut_short(self._vendor)
        self._remember(reader)

    def _remember(self, reader: EventReader) -> None:
        blocks = reader.thinking_blocks()
        if not blocks or not reader.tool_ids:
            return
        self._signed[tuple(reader.tool_ids)] = blocks
        while len(self._signed) > _SIGNED_CAPACITY:
            self._signed.popitem(last=False)


@dataclass(slots=True)
class _Block:
    kind: str
    tool_index: int | None = None
    has_arguments: bool = False
    thinking: list[str] = field(default_factory=list)
    signature: str = ""
    data: str = ""
    """For ``redacted_thinking``: the opaque payload."""


THINKING_BUDGETS: dict[ThinkingLevel, int | None] = {
    "off": None,
    "low": 1024,
    "medium": 4096,
    "high": 16384,
}
"""Extended-thinking token budget of each thinking level (1024 is the API's minimum)."""


class EventReader:
    """Turns Messages API stream events into parts and tracks usage and thinking blocks."""

    def __init__(self, vendor: Vendor, secret: str | None) -> None:
        self._vendor = vendor
        self._secret = secret
        self._blocks: dict[int, _Block] = {}
        self._usage: dict[str, int] = {}
        self.tool_ids: list[str] = []
        self.finished = False

    def parts(self, name: str, data: dict[str, Any]) -> Iterator[StreamPart]:
        """The parts of one event; raises the provider error an ``error`` event carries."""
        match data.get("type") or name:
            case "message_start":
                self._add_usage((data.get("message") or {}).get("usage"))
            case "content_block_start":
                yield from self._start(int(data.get("index", 0)), data.get("content_block") or {})
            case "content_block_delta":
                yield from self._delta(int(data.get("index", 0)), data.get("delta") or {})
            case "content_block_stop":
                yield from self._stop(int(data.get("index", 0)))
            case "message_delta":
                self._add_usage(data.get("usage"))
            case "message_stop":
                self.finished = True
                yield self.usage()
            case "error":
                error = error_from_json(data) or error_from_json({"error": data})
                assert error is not None  # {"error": dict} always parses
                raise error_for_payload(error, self._vendor, secret=self._secret)
            case _:
                pass  # ping, and event types added after this was written

    def usage(self) -> UsagePart:
        """Usage so far; input counts cache reads and writes, as they are billed as input."""
        cached = self._usage.get("cache_read_input_tokens", 0)
        return UsagePart(
            input_tokens=self._usage.get("input_tokens", 0)
            + cached
            + self._usage.get("cache_creation_input_tokens", 0),
            output_tokens=self._usage.get("output_tokens", 0),
            cached_tokens=cached,
        )

    def thinking_blocks(self) -> list[dict[str, Any]]:
        """The reply's thinking blocks as they must be sent back."""
        out: list[dict[str, Any]] = []
        for _, block in sorted(self._blocks.items()):
            if block.kind == "thinking" and block.signature:
                out.append(
                    {
                        "type": "thinking",
                        "thinking": "".join(block.thinking),
                        "signature": block.signature,
                    }
                )
            elif block.kind == "redacted_thinking":
                out.append({"type": "redacted_thinking", "data": block.data})
        return out

    def _add_usage(self, usage: dict[str, Any] | None) -> None:
        # message_delta counts are cumulative: a later value replaces an earlier one.
        for key, value in (usage or {}).items():
            if isinstance(value, int):
                self._usage[key] = value

    def _start(self, index: int, content: dict[str, Any]) -> Iterator[StreamPart]:
        kind = str(content.get("type", ""))
        block = self._blocks[index] = _Block(kind)
        match kind:
            case "text" if content.get("text"):
                yield TextPart(content["text"])
            case "thinking":
                if content.get("thinking"):
                    block.thinking.append(content["thinking"])
                    yield ReasoningPart(content["thinking"])
                block.signature = content.get("signature") or ""
            case "redacted_thinking":
                block.data = content.get("data") or ""
            case "tool_use":
                block.tool_index = len(self.tool_ids)
                self.tool_ids.append(str(content.get("id", "")))
                initial = content.get("input")
                block.has_arguments = bool(initial)
                yield ToolCallPart(
                    block.tool_index,
                    id=content.get("id") or None,
                    name=content.get("name") or None,
                    arguments=json.dumps(initial) if initial else "",
                )
            case _:
                pass

    def _delta(self, index: int, delta: dict[str, Any]) -> Iterator[StreamPart]:
        block = self._blocks.get(index) or self._blocks.setdefault(index, _Block("unknown"))
        match delta.get("type"):
            case "text_delta" if delta.get("text"):
                yield TextPart(delta["text"])
            case "thinking_delta" if delta.get("thinking"):
                block.thinking.append(delta["thinking"])
                yield ReasoningPart(delta["thinking"])
            case "signature_delta":
                block.signature += delta.get("signature") or ""
            case "input_json_delta" if delta.get("partial_json") and block.tool_index is not None:
                block.has_arguments = True
                yield ToolCallPart(block.tool_index, arguments=delta["partial_json"])
            case _:
                pass

    def _stop(self, index: int) -> Iterator[StreamPart]:
        block = self._blocks.get(index)
        if block is not None and block.tool_index is not None and not block.has_arguments:
            # A call without arguments streams no JSON at all; the runtime expects an object.
            yield ToolCallPart(block.tool_index, arguments="{}")


# --- requests -------------------------------------------------------------------------------


def _messages(
    request: ModelRequest, signed: OrderedDict[tuple[str, ...], list[dict[str, Any]]]
) -> tuple[str, list[dict[str, Any]]]:
    """The top-level system text and the alternating message list."""
    system = [request.system] if request.system else []
    out: list[dict[str, Any]] = []
    for message in request.messages:
        match message.role:
            case "system":
                system.append(message.content)
            case "user":
                _append(out, "user", _text(message.content) + _image_blocks(message.images))
            case "tool":
                _append(out, "user", [_tool_result(message)])
            case "assistant":
                _append(out, "assistant", _assistant_blocks(message, signed))
    for item in out:
        if item["role"] == "user":  # results must lead the message that answers the calls
            item["content"].sort(key=lambda b: b["type"] != "tool_result")
    return "\n\n".join(s for s in system if s), out


def _tool_result(message: Message) -> dict[str, Any]:
    """A ``tool_result`` block; a call's pictures go inside it, after its text, each named."""
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id or ""}
    if message.images:
        blocks = _text(message.content)
        for image in message.images:
            blocks += _text(f"[Image: {image.label}]" if image.label else "")
            blocks += _image_blocks([image])
        result["content"] = blocks
    elif message.content:
        result["content"] = message.content
    return result


def _append(out: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    if not blocks:
        return
    if out and out[-1]["role"] == role:
        out[-1]["content"].extend(blocks)
    else:
        out.append({"role": role, "content": blocks})


def _text(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}] if text else []


def _image_blocks(images: list[Image]) -> list[dict[str, Any]]:
    return [
        {
            "type": "image",
            "source": {"type": "base64", "media_type": image.media_type, "data": image.base64()},
        }
        for image in images
    ]


def _assistant_blocks(
    message: Message, signed: OrderedDict[tuple[str, ...], list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    ids = tuple(c.id for c in message.tool_calls)
    blocks = [dict(b) for b in signed.get(ids, [])] if ids else []
    blocks += _text(message.content)
    for call in message.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": _input(call.arguments)}
        )
    return blocks


def _input(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _unsigned_tool_loop(messages: list[dict[str, Any]]) -> bool:
    """Whether a tool loop is open and its assistant message lacks its thinking blocks."""
    for item in reversed(messages):
        if item["role"] == "assistant":
            blocks = item["content"]
            calls = any(b["type"] == "tool_use" for b in blocks)
            thought = blocks[0]["type"] in ("thinking", "redacted_thinking")
            return calls and not thought
    return False


def _tool(tool: ToolDefinition) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
