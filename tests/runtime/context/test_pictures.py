"""Pictures tool calls produce reach the model: figures of ``python`` and MCP images.

A real jupyter server with a real kernel runs the code; the models are served over real HTTP by
the provider stand-in speaking OpenAI's and Anthropic's wire formats, which records each request
so the test can decode the picture it carried. The MCP server is the SDK-written one of
``tests/mcp/sdk_server.py`` over stdio.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from tests.helpers import ApiClient, types
from tests.notebook_room import write_notebook
from tests.provider_server import ProviderServer, Reply, anthropic_stream, openai_stream, serve
from tests.tools.test_kernel_tools import kernel_of

pytestmark = pytest.mark.timeout(120)

MAX_SIDE = 200
MCP_SERVER = str(Path(__file__).parents[2] / "mcp" / "sdk_server.py")
PLOT = """
import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(8, 5), dpi=100)
ax.plot([3, 1, 4, 1, 5, 9, 2, 6])
ax.set_title("rising and falling")
plt.show()
"""
DATA_URL = "data:image/png;base64,"

provider = pytest.fixture(serve)


@pytest.fixture
def neta_config(provider: ProviderServer) -> dict[str, Any]:
    """Three endpoints on the stand-in: one that sees, one that is blind, one Anthropic."""
    base = f"{provider.url}/v1"
    return {
        "endpoints": {
            "local": {"base_url": base, "vision": True},
            "blind": {"base_url": base, "vision": False},
            "claude": {"kind": "anthropic", "base_url": provider.url},
        },
        "permission_rules": [{"tool": "python", "action": "allow"}],
        "image_max_side": MAX_SIDE,
        "mcp_servers": {"cat": {"command": sys.executable, "args": [MCP_SERVER], "startup": True}},
    }


def size_of(png: bytes) -> tuple[int, int]:
    with Image.open(io.BytesIO(png)) as picture:
        assert picture.format == "PNG"
        return picture.size


async def run_to_end(api: ApiClient, model: str, **fields: Any) -> list[dict[str, Any]]:
    rid = (await api.start("plot the numbers", model=model, **fields))["requestId"]
    events = await api.segment(rid)
    assert types(events)[-1] == "MESSAGE_COMPLETED", events[-1]
    return events


async def figure_of(api: ApiClient, events: list[dict[str, Any]]) -> tuple[str, tuple[int, int]]:
    """The name and pixel size of the figure the run's python call produced, as stored."""
    done = next(e["data"] for e in events if e["eventType"] == "TOOL_COMPLETED")
    [path] = done["images"]
    download = await api.http.get(
        "neta/api/agent/attachment/download", params={"virtualPath": path}
    )
    assert download.status_code == 200
    return path.rsplit("/", 1)[-1], size_of(download.content)


def assert_scaled(shown: tuple[int, int], original: tuple[int, int]) -> None:
    """The picture the model got is the figure, scaled to the longest side allowed."""
    assert max(original) > MAX_SIDE, "the figure is larger than the limit"
    assert max(shown) == MAX_SIDE
    assert abs(shown[0] / shown[1] - original[0] / original[1]) < 0.02


def plot_call_openai(call_id: str = "call_plot") -> Reply:
    return Reply(body=openai_stream(calls=[(call_id, "python", [json.dumps({"code": PLOT})])]))


async def test_a_figure_reaches_an_openai_format_model_as_an_image_after_the_results(
    api: ApiClient, provider: ProviderServer, jp_serverapp: Any
) -> None:
    provider.reply(plot_call_openai(), Reply(body=openai_stream(text=["A zigzag."])))
    async with kernel_of(jp_serverapp) as (kernel_id, _bridge):
        events = await run_to_end(api, "local:vision", kernelId=kernel_id)
    name, original = await figure_of(api, events)

    messages = provider.requests[1].json["messages"]
    tool = next(m for m in messages if m["role"] == "tool")
    assert "[image: figure-1.png]" in tool["content"] and isinstance(tool["content"], str)
    # Tool messages take text only on most servers: the picture follows in a user message.
    after = messages[messages.index(tool) + 1]
    assert after["role"] == "user"
    label, image = after["content"]
    assert label["type"] == "text" and "call_plot" in label["text"] and name in label["text"]
    assert image["type"] == "image_url" and image["image_url"]["url"].startswith(DATA_URL)
    shown = size_of(base64.b64decode(image["image_url"]["url"].removeprefix(DATA_URL)))
    assert_scaled(shown, original)
    assert f"{original[0]}x{original[1]} PNG" in label["text"]
    # The event log references the figure; its bytes are in no event.
    encoded = base64.b64encode(base64.b64decode(image["image_url"]["url"][len(DATA_URL) :]))
    assert encoded.decode()[:200] not in json.dumps(events)


async def test_a_figure_reaches_an_anthropic_model_inside_the_tool_result(
    api: ApiClient, provider: ProviderServer, jp_serverapp: Any
) -> None:
    provider.reply(
        Reply(body=anthropic_stream(calls=[("toolu_plot", "python", {"code": PLOT})])),
        Reply(body=anthropic_stream(text="A zigzag.")),
    )
    async with kernel_of(jp_serverapp) as (kernel_id, _bridge):
        events = await run_to_end(api, "claude:sonnet", kernelId=kernel_id)
    name, original = await figure_of(api, events)

    assert provider.requests[1].path.endswith("/v1/messages")
    last = provider.requests[1].json["messages"][-1]
    [result] = [b for b in last["content"] if b["type"] == "tool_result"]
    assert result["tool_use_id"] == "toolu_plot"
    text, label, image = result["content"]
    assert text["type"] == "text" and "[image: figure-1.png]" in text["text"]
    assert label["type"] == "text" and name in label["text"]
    assert image["type"] == "image" and image["source"]["media_type"] == "image/png"
    assert_scaled(size_of(base64.b64decode(image["source"]["data"])), original)


async def test_a_model_without_vision_is_told_of_the_figure_instead(
    api: ApiClient, provider: ProviderServer, jp_serverapp: Any
) -> None:
    provider.reply(plot_call_openai(), Reply(body=openai_stream(text=["I cannot see it."])))
    async with kernel_of(jp_serverapp) as (kernel_id, _bridge):
        events = await run_to_end(api, "blind:qwen", kernelId=kernel_id)
    name, (width, height) = await figure_of(api, events)

    sent = provider.requests[1]
    assert "image_url" not in sent.raw and "base64" not in sent.raw
    messages = sent.json["messages"]
    assert all(isinstance(m["content"], str | None) for m in messages)
    tool = next(m for m in messages if m["role"] == "tool")
    assert tool["content"].endswith(
        f"[image {name}: {width}x{height} PNG, not shown: this model does not accept images]"
    )


async def mcp_ready(api: ApiClient) -> None:
    for _ in range(600):
        response = await api.http.get("neta/api/mcp")
        servers = {s["name"]: s for s in response.json()["servers"]}
        if servers["cat"]["state"] != "starting":
            assert servers["cat"]["state"] == "ready", servers["cat"]
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the MCP server never started")


async def test_an_mcp_image_result_reaches_the_model_as_an_image(
    api: ApiClient, provider: ProviderServer
) -> None:
    await mcp_ready(api)
    provider.reply(
        Reply(body=openai_stream(calls=[("call_px", "cat__pixel", ["{}"])])),
        Reply(body=openai_stream(text=["One pixel."])),
    )
    events = await run_to_end(api, "local:vision")
    done = next(e["data"] for e in events if e["eventType"] == "TOOL_COMPLETED")
    assert done["toolName"] == "cat__pixel" and len(done["images"]) == 1

    messages = provider.requests[1].json["messages"]
    tool = next(m for m in messages if m["role"] == "tool")
    after = messages[messages.index(tool) + 1]
    assert after["role"] == "user" and "cat__pixel call call_px" in after["content"][0]["text"]
    url = after["content"][1]["image_url"]["url"]
    assert size_of(base64.b64decode(url.removeprefix(DATA_URL))) == (1, 1)


async def test_the_demo_model_says_what_picture_it_was_shown(
    api: ApiClient, jp_serverapp: Any, jp_root_dir: Path
) -> None:
    (jp_root_dir / "data.csv").write_text("day,qty\n1,3\n2,5\n3,4\n4,8\n")
    async with kernel_of(jp_serverapp) as (kernel_id, bridge):
        await bridge.execute(f"import os\nos.chdir({str(jp_root_dir)!r})")
        rid = (await api.start("plot qty from data.csv", model="demo", kernelId=kernel_id))[
            "requestId"
        ]
        events = await api.segment(rid)
    assert types(events)[-1] == "MESSAGE_COMPLETED", events[-1]
    name, original = await figure_of_python(api, events)
    answer = "".join(e["data"]["text"] for e in events if e["eventType"] == "TEXT_DELTA")
    scale = MAX_SIDE / max(original)
    shown = [round(side * scale) for side in original]
    # The file is named after its call, to be unique; the answer names it as the person knows it.
    call_id = next(
        e["data"]["toolCallId"]
        for e in events
        if e["eventType"] == "TOOL_COMPLETED" and e["data"]["toolName"] == "python"
    )
    assert name.startswith(f"{call_id}-")
    person = name.removeprefix(f"{call_id}-")
    assert f"I was shown the picture it made: {person} ({original[0]}x{original[1]} PNG" in answer
    assert call_id not in answer
    assert any(
        f"received as a {w}x{h} PNG image" in answer
        for w in (shown[0] - 1, shown[0], shown[0] + 1)
        for h in (shown[1] - 1, shown[1], shown[1] + 1)
    ), answer


async def figure_of_python(
    api: ApiClient, events: list[dict[str, Any]]
) -> tuple[str, tuple[int, int]]:
    python = [
        e
        for e in events
        if e["eventType"] == "TOOL_COMPLETED" and e["data"]["toolName"] == "python"
    ]
    return await figure_of(api, python)


def cell_calls(endpoint: str, calls: list[tuple[str, str]]) -> list[Reply]:
    """The model's replies: one ``run_cell`` call per ``(call id, cell id)``, then an answer."""
    if endpoint == "claude":
        replies = [
            Reply(body=anthropic_stream(calls=[(call_id, "run_cell", {"cell_id": cell})]))
            for call_id, cell in calls
        ]
        return [*replies, Reply(body=anthropic_stream(text="Done."))]
    replies = [
        Reply(body=openai_stream(calls=[(call_id, "run_cell", [json.dumps({"cell_id": cell})])]))
        for call_id, cell in calls
    ]
    return [*replies, Reply(body=openai_stream(text=["Done."]))]


def image_after(received: Any, call_id: str) -> bytes:
    """The picture of ``call_id``'s result in a request, in either wire format."""
    for message in received.json["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_result" and block["tool_use_id"] == call_id:
                image = next(b for b in block["content"] if b["type"] == "image")
                return base64.b64decode(image["source"]["data"])
            if block.get("type") == "text" and f"call {call_id}" in block["text"]:
                parts = message["content"]
                url = parts[parts.index(block) + 1]["image_url"]["url"]
                return base64.b64decode(url.removeprefix(DATA_URL))
    raise AssertionError(f"no picture of {call_id} in the request")


def result_text(received: Any, call_id: str) -> str:
    """The text of ``call_id``'s result in a request, in either wire format."""
    for message in received.json["messages"]:
        if message.get("tool_call_id") == call_id:
            return str(message["content"])
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_result" and block["tool_use_id"] == call_id:
                content = block.get("content", "")
                return content if isinstance(content, str) else content[0]["text"]
    raise AssertionError(f"no result of {call_id} in the request")


@pytest.mark.parametrize("endpoint", ["local", "claude"])
async def test_run_cell_figures_and_tracebacks_reach_the_model(
    api: ApiClient, provider: ProviderServer, jp_serverapp: Any, jp_root_dir: Path, endpoint: str
) -> None:
    plot, broken = write_notebook(
        jp_root_dir / "cells.ipynb", ("code", PLOT), ("code", "print('dividing')\n1 / 0")
    )
    provider.reply(*cell_calls(endpoint, [("call_plot", plot), ("call_div", broken)]))
    async with kernel_of(jp_serverapp) as (kernel_id, _bridge):
        started = await api.start(
            "plot, then divide",
            model=f"{endpoint}:m",
            kernelId=kernel_id,
            notebookPath="cells.ipynb",
            approve="auto",
        )
        events = await api.segment(started["requestId"])
    assert types(events)[-1] == "MESSAGE_COMPLETED", events[-1]
    _name, original = await figure_of(api, events)

    assert_scaled(size_of(image_after(provider.requests[1], "call_plot")), original)
    told = result_text(provider.requests[2], "call_div")
    assert "dividing" in told and "ZeroDivisionError" in told and "Traceback" in told
