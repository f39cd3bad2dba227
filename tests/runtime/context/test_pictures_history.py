"""Pictures in a conversation that goes on: after other calls' results, across resumes, gone.

The provider stand-in serves the model over real HTTP; a real jupyter server and kernel run the
code. The history keeps only the pictures' file references, so every activation of the run reads
them again, and says so when a file is gone.
"""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from neta_jupyter.providers import ModelRegistry
from neta_jupyter.providers.base import (
    Image,
    Message,
    ModelRequest,
    ProviderInvalidRequest,
    ToolCall,
)
from neta_jupyter.providers.demo import DemoModel
from neta_jupyter.providers.openai_compat import OpenAIChatModel
from neta_jupyter.runtime.activation.budget import estimate
from tests.helpers import ApiClient, types
from tests.provider_server import ProviderServer, Reply, guarded_client, openai_stream, serve
from tests.runtime.context.test_pictures import DATA_URL, MAX_SIDE, PLOT, size_of
from tests.tools.test_kernel_tools import approve_pending, kernel_of

pytestmark = pytest.mark.timeout(120)

provider = pytest.fixture(serve)
client = pytest.fixture(guarded_client)

PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


@pytest.fixture
def neta_config(provider: ProviderServer) -> dict[str, Any]:
    return {
        "endpoints": {"local": {"base_url": f"{provider.url}/v1", "vision": True}},
        "image_max_side": MAX_SIDE,
    }


async def test_the_pictures_of_several_calls_follow_all_their_results(
    provider: ProviderServer, client: httpx.AsyncClient
) -> None:
    """Every result of a reply's calls must follow the reply: the pictures come after them."""
    calls = [ToolCall("call_a", "python", "{}"), ToolCall("call_b", "cat__pixel", "{}")]
    request = ModelRequest(
        system="",
        messages=[
            Message("user", "two pictures"),
            Message("assistant", tool_calls=calls),
            Message(
                "tool",
                "[image: a]",
                tool_call_id="call_a",
                name="python",
                images=[Image("image/png", PIXEL, "a.png")],
            ),
            Message(
                "tool",
                "[image: b]",
                tool_call_id="call_b",
                name="cat__pixel",
                images=[Image("image/png", PIXEL, "b.png")],
            ),
        ],
        tools=[],
    )
    provider.reply(Reply(body=openai_stream(text=["Two."])))
    model = OpenAIChatModel("m", base_url=f"{provider.url}/v1", api_key="", client=client)
    _ = [part async for part in model.stream(request)]
    sent = provider.requests[0].json["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool", "user"]
    assert [m["content"] for m in sent[2:4]] == ["[image: a]", "[image: b]"]
    texts = [p["text"] for p in sent[4]["content"] if p["type"] == "text"]
    assert texts == [
        "[Image from the python call call_a: a.png]",
        "[Image from the cat__pixel call call_b: b.png]",
    ]
    urls = [p["image_url"]["url"] for p in sent[4]["content"] if p["type"] == "image_url"]
    assert [base64.b64decode(u.removeprefix(DATA_URL)) for u in urls] == [PIXEL, PIXEL]


def python_call(call_id: str, code: str) -> Reply:
    return Reply(body=openai_stream(calls=[(call_id, "python", [json.dumps({"code": code})])]))


def pictures_in(received: Any) -> list[bytes]:
    return [
        base64.b64decode(part["image_url"]["url"].removeprefix(DATA_URL))
        for message in received.json["messages"]
        if isinstance(message["content"], list)
        for part in message["content"]
        if part["type"] == "image_url"
    ]


async def test_a_figure_is_shown_again_after_a_resume_and_named_once_its_file_is_gone(
    api: ApiClient, provider: ProviderServer, jp_serverapp: Any, tmp_path: Path
) -> None:
    provider.reply(
        python_call("call_plot", PLOT),
        python_call("call_next", "print(1)"),
        python_call("call_last", "print(2)"),
        Reply(body=openai_stream(text=["Done."])),
    )
    async with kernel_of(jp_serverapp) as (kernel_id, _bridge):
        rid = (await api.start("plot", model="local:m", kernelId=kernel_id))["requestId"]
        events = await api.segment(rid)
        for _ in range(3):  # each python call waits for approval: the run suspends and resumes
            assert types(events)[-1] == "MESSAGE_SUSPENDED"
            if len(provider.requests) == 3:
                for stored in (tmp_path / "neta-data" / "attachments").rglob("*figure-1.png"):
                    stored.unlink()
            await approve_pending(api, rid, events)
            events = await api.segment(rid, events[-1]["seq"])
        assert types(events)[-1] == "MESSAGE_COMPLETED"

    after_plot, after_resume, after_deletion = provider.requests[1:4]
    [first] = pictures_in(after_plot)
    assert max(size_of(first)) == MAX_SIDE
    assert pictures_in(after_resume) == [first], "the next activation reads the figure again"
    assert pictures_in(after_deletion) == []
    tool = next(m for m in after_deletion.json["messages"] if m.get("tool_call_id") == "call_plot")
    assert tool["content"].endswith(
        "[image call_plot-figure-1.png: not shown, its file is no longer stored]"
    )


async def test_a_text_only_server_sent_a_picture_says_to_turn_vision_off(
    provider: ProviderServer, client: httpx.AsyncClient
) -> None:
    """llama.cpp without a vision projector fails the request; retrying cannot help."""
    message = (
        "image input is not supported - hint: if this is unexpected, you may need to provide "
        "the mmproj"
    )
    provider.reply(Reply.error(500, {"error": {"code": 500, "message": message}}))
    request = ModelRequest(
        system="", messages=[Message("user", "see", images=[Image("image/png", PIXEL)])], tools=[]
    )
    model = OpenAIChatModel("m", base_url=f"{provider.url}/v1", api_key="", client=client)
    with pytest.raises(ProviderInvalidRequest) as refused:
        _ = [part async for part in model.stream(request)]
    assert message in str(refused.value)
    assert str(refused.value).endswith(
        '(the model takes no images: set "vision": false on its endpoint)'
    )


def big_png() -> bytes:
    from PIL import Image as Pillow

    buffer = io.BytesIO()
    Pillow.new("RGB", (800, 600), (30, 120, 200)).save(buffer, format="PNG")
    return buffer.getvalue()


async def upload(api: ApiClient, content: bytes) -> dict[str, Any]:
    response = await api.http.post(
        "neta/api/agent/attachment/upload",
        params={"fileName": "big.png"},
        content=content,
        headers={"Content-Type": "image/png"},
    )
    assert response.status_code == 200, response.text
    uploaded: dict[str, Any] = response.json()
    return uploaded


async def test_an_attached_picture_is_scaled_and_the_demo_model_says_what_it_got(
    api: ApiClient, provider: ProviderServer
) -> None:
    picture = await upload(api, big_png())
    attach = [{"attachmentId": picture["attachmentId"]}]
    provider.reply(Reply(body=openai_stream(text=["Blue."])))
    rid = (await api.start("what colour?", model="local:m", attachments=attach))["requestId"]
    assert types(await api.segment(rid))[-1] == "MESSAGE_COMPLETED"
    [shown] = pictures_in(provider.requests[0])
    assert size_of(shown) == (200, 150)

    rid = (await api.start("what colour?", model="demo", attachments=attach))["requestId"]
    events = await api.segment(rid)
    answer = "".join(e["data"]["text"] for e in events if e["eventType"] == "TEXT_DELTA")
    assert (
        "I was shown the picture you attached: big.png (800x600 PNG, shown scaled to 200x150 "
        "PNG), received as a 200x150 PNG image." in answer
    )


def test_the_budget_counts_what_pictures_cost() -> None:
    """A picture's input tokens count towards the prompt budget, though it has no text."""
    text_only = ModelRequest(system="", messages=[Message("user", "see " * 100)], tools=[])
    picture = Image("image/png", big_png())
    with_picture = ModelRequest(
        system="", messages=[Message("user", "see " * 100, images=[picture])], tools=[]
    )
    model = DemoModel()
    assert estimate(model, with_picture).tokens == estimate(model, text_only).tokens + 640


def test_openai_endpoints_see_pictures_only_at_openai_unless_they_say_so() -> None:
    """A text-only model behind a stand-in for OpenAI fails a whole request with a picture."""
    local = "http://127.0.0.1:8080/v1"
    at_openai = ModelRegistry(environ={})
    moved = ModelRegistry(environ={"OPENAI_BASE_URL": local})
    told = ModelRegistry(environ={"OPENAI_BASE_URL": local}, endpoints={"openai": {"vision": True}})
    proxy = ModelRegistry(environ={}, endpoints={"openai": {"base_url": local}})
    assert at_openai.profile("openai:gpt-4.1").images
    assert not moved.profile("openai:qwen2.5-coder-1.5b").images
    assert told.profile("openai:qwen2.5-vl").images
    assert not proxy.profile("openai:qwen").images
    assert ModelRegistry(environ={"ANTHROPIC_BASE_URL": local}).profile("anthropic:c").images
