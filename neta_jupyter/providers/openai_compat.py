r"""OpenAI Chat Completions streaming: OpenAI itself and every server that speaks its wire format.

vLLM, Ollama, LM Studio and llama.cpp's server all serve ``POST {base_url}/chat/completions``.
The request asks for ``stream: true`` with ``stream_options.include_usage`` and the reply is a
server-sent event stream of ``chat.completion.chunk`` objects ended by ``data: [DONE]``::

    data: {"choices":[{"index":0,"delta":{"reasoning_content":"Let me"}}]}
    data: {"choices":[{"index":0,"delta":{"content":"Hello"}}]}
    data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1",
           "type":"function","function":{"name":"read_file","arguments":"{\"pa"}}]}}]}
    data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12,
           "prompt_tokens_details":{"cached_tokens":0},
           "completion_tokens_details":{"reasoning_tokens":4}}}
    data: [DONE]

This module is a plain translation in both directions; the HTTP exchange and the mapping of
failures to :class:`~neta_jupyter.providers.base.ProviderError` live in ``_http``.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlsplit

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
    ToolCallPart,
    ToolDefinition,
    UsagePart,
)

__all__ = ["OPENAI_BASE_URL", "OpenAIChatModel"]

OPENAI_BASE_URL = "https://api.openai.com/v1"
"""Where ``openai:`` models are served unless ``OPENAI_BASE_URL`` or the config says otherwise."""


class OpenAIChatModel(HttpModel):
    """A model behind an OpenAI-compatible ``/chat/completions`` endpoint.

    ``base_url`` and ``api_key`` default to ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` like the
    official client does; pass ``api_key=""`` for a server that wants no key. The key is sent
    only as ``Authorization: Bearer …`` and never appears in the model's repr or its errors.
    """

    def __init__(
        self,
        model_name: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: httpx.AsyncClient | None = None,
        max_tokens: int = 4096,
        temperature: float | None = None,
        name: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
    ) -> None:
        super().__init__(
            model_name,
            base_url=base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL,
            api_key=api_key if api_key is not None else os.environ.get("OPENAI_API_KEY"),
            client=client,
            name=name or f"openai:{model_name}",
            vendor=Vendor(name or f"openai:{model_name}", api_key_env),
        )
        self.max_tokens = max_tokens
        """Output cap of a reply when the request sets none: every request carries one, or a
        looping local model generates until its context is full."""
        self.temperature = temperature
        """Sampling temperature; None leaves it to the server (llama.cpp's default is 0.8)."""

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body sent for ``request``."""
        body: dict[str, Any] = {
            "model": self.model_name,
            "messages": _messages(request),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            body["tools"] = [_tool(t) for t in request.tools]
        # OpenAI's reasoning models refuse the older field; most other servers only know it.
        field = "max_completion_tokens" if self._is_openai() else "max_tokens"
        body[field] = request.max_output_tokens or self.max_tokens
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if request.thinking in ("low", "medium", "high"):
            # "off" sends nothing: servers disagree on how (or whether) to turn reasoning off.
            body["reasoning_effort"] = request.thinking
        return body

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        """Yield the parts of one reply as the chunks arrive."""
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        reader = ChunkReader(self._vendor, self._api_key)
        done = False

        def parts_of(event: ServerSentEvent) -> Iterator[StreamPart]:
            nonlocal done
            if _is_done(event):
                done = True
                if reader.usage is not None:
                    yield reader.usage
            elif event.data:
                yield from reader.parts(decode_json(event.data, self._vendor))

        async for part in self._stream_parts(
            "/chat/completions", headers, self.request_body(request), _is_end, parts_of
        ):
            yield part
        if not done:
            raise stream_cut_short(self._vendor)

    def _is_openai(self) -> bool:
        return urlsplit(self.base_url).hostname == "api.openai.com"


def _is_done(event: ServerSentEvent) -> bool:
    return event.data.strip() == "[DONE]"


def _is_end(event: ServerSentEvent) -> bool:
    """``[DONE]``, or an error chunk, after which nothing useful comes.

    Answer text that merely mentions "error" arrives with its quotes escaped and never matches.
    """
    return _is_done(event) or '"error"' in event.data


class ChunkReader:
    """Turns ``chat.completion.chunk`` objects into parts; keeps the last usage seen."""

    def __init__(self, vendor: Vendor, secret: str | None) -> None:
        self._vendor = vendor
        self._secret = secret
        self.usage: UsagePart | None = None

    def parts(self, chunk: dict[str, Any]) -> Iterator[StreamPart]:
        """The parts of one chunk; raises the provider error a chunk may carry instead."""
        if usage := chunk.get("usage"):
            self.usage = _usage(usage)
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) == 0:
                yield from _delta_parts(choice.get("delta") or {})
        # Some servers report a failure as a chunk: alone, or with finish_reason "error".
        if (error := error_from_json(chunk)) is not None:
            raise error_for_payload(error, self._vendor, secret=self._secret)


def _delta_parts(delta: dict[str, Any]) -> Iterator[StreamPart]:
    # Servers name reasoning differently; some send both names with the same text.
    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        yield ReasoningPart(reasoning)
    content = delta.get("content")
    if isinstance(content, str) and content:
        yield TextPart(content)
    for position, call in enumerate(delta.get("tool_calls") or []):
        function = call.get("function") or {}
        arguments = function.get("arguments") or ""
        yield ToolCallPart(
            index=int(call.get("index", position)),
            id=call.get("id") or None,
            name=function.get("name") or None,
            arguments=arguments if isinstance(arguments, str) else json.dumps(arguments),
        )


def _usage(usage: dict[str, Any]) -> UsagePart:
    prompt_details = usage.get("prompt_tokens_details") or {}
    completion_details = usage.get("completion_tokens_details") or {}
    return UsagePart(
        input_tokens=int(usage.get("prompt_tokens") or 0),
        output_tokens=int(usage.get("completion_tokens") or 0),
        cached_tokens=int(prompt_details.get("cached_tokens") or 0),
        reasoning_tokens=int(completion_details.get("reasoning_tokens") or 0),
    )


def _messages(request: ModelRequest) -> list[dict[str, Any]]:
    """The messages; pictures of tool results follow the results in a user message.

    ``tool`` messages carry text only on most servers (llama.cpp, vLLM and OpenAI itself take
    image parts in user messages alone), and every result of a reply's calls must follow the
    reply directly, so the pictures of a run of tool results go in one user message after the
    last of them, each named with the call that produced it.
    """
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    pending: list[dict[str, Any]] = []
    for message in request.messages:
        if message.role != "tool" and pending:
            out.append({"role": "user", "content": pending})
            pending = []
        out.append(_message(message))
        if message.role == "tool" and message.images:
            pending += _tool_images(message)
    if pending:
        out.append({"role": "user", "content": pending})
    return out


def _tool_images(message: Message) -> list[dict[str, Any]]:
    call = f"{message.name or 'tool'} call {message.tool_call_id or ''}".strip()
    parts: list[dict[str, Any]] = []
    for image in message.images:
        what = f": {image.label}" if image.label else ""
        parts.append({"type": "text", "text": f"[Image from the {call}{what}]"})
        parts.append(_image_part(image))
    return parts


def _image_part(image: Image) -> dict[str, Any]:
    return {
        "type": "image_url",
        "image_url": {"url": f"data:{image.media_type};base64,{image.base64()}"},
    }


def _message(message: Message) -> dict[str, Any]:
    match message.role:
        case "assistant" if message.tool_calls:
            return {
                "role": "assistant",
                "content": message.content or None,
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    }
                    for call in message.tool_calls
                ],
            }
        case "tool":
            return {
                "role": "tool",
                "tool_call_id": message.tool_call_id or "",
                "content": message.content,
            }
        case "user" if message.images:
            parts: list[dict[str, Any]] = [{"type": "text", "text": message.content}]
            parts += [_image_part(image) for image in message.images]
            return {"role": "user", "content": parts}
        case _:
            return {"role": message.role, "content": message.content}


def _tool(tool: ToolDefinition) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }
