"""The run emitter: deltas are appended in batches without changing order, content or timing."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path

from neta_jupyter.events import AgentEvent, EventType, ReasoningData, TextData
from neta_jupyter.events.encoding import decode_event, encode_json
from neta_jupyter.providers.base import StreamPart, TextPart
from neta_jupyter.runtime.activation.streaming import ReplyStreamer
from neta_jupyter.runtime.log.emitter import RunEmitter
from neta_jupyter.store import MemoryBackend, Store
from neta_jupyter.store.backlog import BACKLOG

AWKWARD = ["plain", 'quo"te\\back', "new\nline\t", "\x00\x1f\x7f", "é 中 😀", "\u2028", "</script>"]


async def test_batched_deltas_are_stored_as_the_models_encode_them(tmp_path: Path) -> None:
    store = Store(tmp_path / "log.sqlite3")
    await store.events.open("r_batch")
    emitter = RunEmitter(store.events, "r_batch")
    expected: list[AgentEvent] = []
    for step, total in ((None, None), (1, None), (1, 40), (2, 90)):
        emitter.step, emitter.total_tokens = step, total
        for text in AWKWARD:
            for event_type, data in (
                (EventType.REASONING_DELTA, ReasoningData(text=text)),
                (EventType.TEXT_DELTA, TextData(text=text)),
            ):
                emitter.emit_text(event_type, text)
                expected.append(
                    AgentEvent(
                        event_type=event_type,
                        request_id="r_batch",
                        data=data,
                        step=step,
                        total_tokens=total,
                    )
                )
    await emitter.flush()
    stored = await store.events.read_after("r_batch", -1)
    store.close()
    assert [event.seq for event in stored] == list(range(len(expected)))
    for event, want in zip(stored, expected, strict=True):
        got = decode_event(event.payload)
        assert got is not None and got.timestamp
        want = want.model_copy(update={"timestamp": got.timestamp})
        assert event.payload == encode_json(want, event.seq)
        assert event.event_type == want.event_type.value


async def test_deltas_keep_their_place_among_other_events(tmp_path: Path) -> None:
    store = Store(tmp_path / "log.sqlite3")
    await store.events.open("r_order")
    emitter = RunEmitter(store.events, "r_order")
    emitter.emit(EventType.TEXT_START, TextData())
    emitter.emit_text(EventType.TEXT_DELTA, "a")
    emitter.emit_text(EventType.TEXT_DELTA, "b")
    emitter.emit(EventType.TEXT_END, TextData())
    emitter.emit_text(EventType.TEXT_DELTA, "c")
    emitter.step = 4
    emitter.emit_text(EventType.TEXT_DELTA, "d")
    await emitter.flush()
    stored = [json.loads(e.payload) for e in await store.events.read_after("r_order", -1)]
    store.close()
    assert [(e["eventType"], e["data"].get("text"), e.get("step")) for e in stored] == [
        ("TEXT_START", "", None),
        ("TEXT_DELTA", "a", None),
        ("TEXT_DELTA", "b", None),
        ("TEXT_END", "", None),
        ("TEXT_DELTA", "c", None),
        ("TEXT_DELTA", "d", 4),
    ]


async def test_a_delta_reaches_a_follower_while_the_provider_waits(tmp_path: Path) -> None:
    # The provider sends its next part only once the follower has received the previous one:
    # a delta held back until the stream moves on would never arrive.
    store = Store(tmp_path / "log.sqlite3")
    seen = asyncio.Event()

    async def provider() -> AsyncIterator[StreamPart]:
        for word in ("one ", "two ", "three"):
            seen.clear()
            yield TextPart(word)
            await seen.wait()

    async def follow() -> list[str]:
        texts: list[str] = []
        async for rows in store.events.follow("r_wait", -1):
            for _, event_type, payload in rows:
                if event_type == "TEXT_DELTA":
                    texts.append(json.loads(payload)["data"]["text"])
                    seen.set()
            if len(texts) == 3:
                return texts
        return texts

    await store.events.open("r_wait")
    follower = asyncio.create_task(follow())
    streamer = ReplyStreamer(RunEmitter(store.events, "r_wait"), "c")
    reply = await asyncio.wait_for(streamer.consume(provider()), timeout=60)
    assert await asyncio.wait_for(follower, timeout=60) == ["one ", "two ", "three"]
    assert reply.text == "one two three"
    store.close()


async def test_a_segments_first_delta_is_committed_with_its_start(tmp_path: Path) -> None:
    # The first token of an answer is what a user waits for: it must not wait for a second
    # commit behind the one that made the segment's start durable.
    store = Store(tmp_path / "log.sqlite3")
    done = asyncio.Event()

    async def provider() -> AsyncIterator[StreamPart]:
        yield TextPart("first ")
        await done.wait()

    async def follow() -> list[list[str]]:
        batches: list[list[str]] = []
        async for rows in store.events.follow("r_first", -1):
            batches.append([event_type for _, event_type, _ in rows])
            if "TEXT_DELTA" in batches[-1]:
                done.set()
                return batches
        return batches

    await store.events.open("r_first")
    follower = asyncio.create_task(follow())
    streamer = ReplyStreamer(RunEmitter(store.events, "r_first"), "c")
    await asyncio.wait_for(streamer.consume(provider()), timeout=60)
    batches = await asyncio.wait_for(follower, timeout=60)
    store.close()
    assert ["TEXT_START", "TEXT_DELTA"] in batches


async def test_a_reply_streamed_faster_than_the_store_writes_waits_for_it() -> None:
    # A provider whose parts are all buffered never suspends; while the store takes nothing
    # (writes fail for a while), the streamer stops pulling parts once the events not yet
    # durable reach the bound, instead of piling the whole reply up in memory.
    backend = MemoryBackend()
    store = Store(backend)
    await store.events.open("r_fast")
    pulled = 0
    parts = 6 * BACKLOG

    async def provider() -> AsyncIterator[StreamPart]:
        nonlocal pulled
        for _ in range(parts):
            pulled += 1
            yield TextPart("tok ")

    async def until_behind() -> None:
        # Not "until a part past the bound was pulled": the streamer may stop right at the
        # bound (its TEXT_START and BACKLOG - 1 deltas), as it does when the part that reaches
        # it is a slice of its own, which a preempted process on a loaded machine makes likely.
        for _ in range(6000):
            if store.events.room() is not None:
                return
            await asyncio.sleep(0.01)

    backend.fail_writes("the disk is full")
    streamer = ReplyStreamer(RunEmitter(store.events, "r_fast"), "c")
    consuming = asyncio.ensure_future(streamer.consume(provider()))
    await asyncio.wait_for(until_behind(), timeout=60)
    for _ in range(20):
        await asyncio.sleep(0.01)
    held = pulled
    for _ in range(20):
        await asyncio.sleep(0.01)
    assert not consuming.done() and pulled == held < parts, "it waits while the store is behind"

    backend.fail_writes(None)
    reply = await asyncio.wait_for(consuming, timeout=60)
    assert reply.text == "tok " * parts
    await store.events.flush()
    stored = await store.events.read_after("r_fast", -1, parts + 10)
    assert [e.seq for e in stored] == list(range(len(stored)))
    texts = [json.loads(e.payload)["data"].get("text", "") for e in stored]
    assert "".join(texts) == "tok " * parts
    store.close()


async def test_envelope_timestamps_are_the_utc_time_of_the_event_in_milliseconds(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "log.sqlite3")
    await store.events.open("r_time")
    emitter = RunEmitter(store.events, "r_time")
    moments: list[tuple[float, float]] = []
    for text in ("a", "b", "c"):
        before = time.time()
        emitter.emit_text(EventType.TEXT_DELTA, text)
        emitter.emit(EventType.TEXT_END, TextData())
        moments.append((before, time.time()))
        await asyncio.sleep(0.0123)
    await emitter.flush()
    stored = await store.events.read_after("r_time", -1)
    store.close()
    stamps = [json.loads(e.payload)["timestamp"] for e in stored]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", s) for s in stamps)
    for (before, after), stamp in zip(moments, stamps[::2], strict=True):
        at = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
        assert int(before * 1000) / 1000 <= at <= after
