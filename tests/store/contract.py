"""The store contract as tests: every backend passes these (``tests/store/test_contract.py``).

A backend is reached through a :class:`Place`: where a store lives, opened again after a restart.
The tests use the store as the runtime does (the event log, its followers, the records), so they
check what users rely on: a stream's seqs are contiguous from 0; nothing is seen before it is
durable, here or from another process; a read after a seq returns exactly what follows it; a
terminal event and the run status it implies are durable together or not at all; a restart keeps
what was durable and numbering continues; one principal never sees another's runs or sessions.
"""

from __future__ import annotations

import asyncio
import json
import random
from typing import Protocol

from neta_jupyter.events import AgentEvent, EventType, MessageData, TextData
from neta_jupyter.store import (
    AttachmentRecord,
    EventRow,
    RunRecord,
    StorageUnavailable,
    Store,
)

TIMEOUT = 60
"""A generous safety timeout, never a speed requirement."""


class Place(Protocol):
    """Where one backend's store lives."""

    def open(self) -> Store:
        """A store on this place: the first, or the one a restarted process opens."""
        ...

    def crash(self, store: Store) -> None:
        """Stop ``store`` as a killed process would: what is not durable yet is lost."""
        ...

    def break_writes(self, store: Store) -> None:
        """Make writes fail for a reason that passes (a full disk)."""
        ...

    def mend_writes(self, store: Store) -> None:
        """Let writes work again."""
        ...


def delta(stream: str, text: str) -> AgentEvent:
    return AgentEvent(event_type=EventType.TEXT_DELTA, request_id=stream, data=TextData(text=text))


def completed(stream: str) -> AgentEvent:
    return AgentEvent(
        event_type=EventType.MESSAGE_COMPLETED,
        request_id=stream,
        data=MessageData(finish_reason="STOP"),
    )


def run_record(request_id: str, principal: str = "alice", session_id: str = "s_1") -> RunRecord:
    return RunRecord(
        request_id=request_id,
        principal=principal,
        session_id=session_id,
        status="running",
        model="scripted",
        created=1_000.0 + len(request_id),
        prompt="hello",
        options={"maxSteps": 3},
        state={"step": 0, "phase": "model"},
    )


async def seqs(store: Store, stream: str, after: int = -1) -> list[int]:
    return [event.seq for event in await store.events.read_after(stream, after)]


async def follow_until(store: Store, stream: str, after: int, last: int) -> list[EventRow]:
    """Everything a follower from ``after`` receives until seq ``last``."""
    got: list[EventRow] = []
    follower = store.events.follow(stream, after)
    try:
        async for batch in follower:
            got += batch
            if got and got[-1][0] >= last:
                return got
    finally:
        await follower.aclose()  # type: ignore[attr-defined]
    return got


class StoreContract:
    """The contract; a subclass provides the ``place`` fixture."""

    async def test_seqs_are_contiguous_from_zero_per_stream(self, place: Place) -> None:
        store = place.open()
        log = store.events
        for stream in ("r_a", "r_b"):
            await log.open(stream)
        firsts = [log.append_nowait(delta(s, str(i))) for i in range(5) for s in ("r_a", "r_b")]
        assert firsts == [i for i in range(5) for _ in range(2)]
        assert log.append_encoded_many("r_a", "TEXT_DELTA", ['"requestId":"r_a"}'] * 3) == 5
        await log.flush()
        assert await seqs(store, "r_a") == list(range(8))
        assert await seqs(store, "r_b") == list(range(5))
        assert (await log.last_seq("r_a"), await log.last_seq("r_b")) == (7, 4)
        stored = await log.read_after("r_a", -1)
        assert [json.loads(e.payload)["seq"] for e in stored] == list(range(8))
        assert await log.last_seq("r_none") == -1 and await seqs(store, "r_none") == []
        store.close()

    async def test_nothing_is_seen_before_it_is_durable(self, place: Place) -> None:
        store = place.open()
        elsewhere = place.open()  # another process on the same storage sees what is durable
        log = store.events
        await log.open("r_d")
        seen: list[int] = []

        async def follow() -> None:
            async for batch in log.follow("r_d", -1):
                durable = await seqs(elsewhere, "r_d")
                for seq, _, _ in batch:
                    assert seq in durable, f"seq {seq} was sent before it was durable"
                    seen.append(seq)
                if batch[-1][1] == "MESSAGE_COMPLETED":
                    return

        follower = asyncio.create_task(follow())
        await asyncio.sleep(0)
        assert log.append_nowait(delta("r_d", "0")) == 0
        assert await log.last_seq("r_d") == -1, "readers see only durable events"
        assert await seqs(store, "r_d") == [] and await seqs(elsewhere, "r_d") == []
        for i in range(1, 300):
            log.append_nowait(delta("r_d", str(i)))
            if i % 40 == 0:
                await asyncio.sleep(0)
        assert await log.append(completed("r_d")) == 300
        assert await seqs(elsewhere, "r_d") == list(range(301)), "append returns once durable"
        await asyncio.wait_for(follower, TIMEOUT)
        assert seen == list(range(301))
        elsewhere.close()
        store.close()

    async def test_read_after_a_seq_returns_exactly_what_follows(self, place: Place) -> None:
        store = place.open()
        log = store.events
        await log.open("r_x")
        for i in range(1000):
            log.append_nowait(delta("r_x", str(i)))
        await log.flush()
        chooser = random.Random(7)
        for after in [-1, 0, 998, 999, 1500, *(chooser.randrange(-1, 999) for _ in range(20))]:
            limit = chooser.choice([1, 7, 100, 4096])
            got = await log.read_after("r_x", after, limit)
            assert [e.seq for e in got] == list(range(after + 1, min(1000, after + 1 + limit)))
            for event in got:
                assert json.loads(event.payload)["data"]["text"] == str(event.seq)
        last = await log.last_event("r_x")
        assert last is not None and last.seq == 999
        store.close()

    async def test_many_streams_written_a_little_at_a_time_read_back_whole(
        self, place: Place
    ) -> None:
        """Many runs at a model's pace: each commit holds a token or two of each, for a long
        time; then one run's long burst; every stream reads back exactly, across a restart,
        a crash and a late follower."""
        store = place.open()
        log = store.events
        streams = [f"r_m{i}" for i in range(20)]
        for stream in streams:
            await log.open(stream)
        counts = dict.fromkeys(streams, 0)
        for i in range(260):
            for stream in streams[: 20 if i % 3 else 12]:  # some commits hold fewer streams
                log.append_nowait(delta(stream, f"{stream}:{counts[stream]}"))
                counts[stream] += 1
            await log.flush()
            if i in (0, 97, 211):
                assert await seqs(store, streams[5]) == list(range(i + 1))
                assert await log.last_seq(streams[5]) == i
                assert await seqs(store, streams[5], i - 1) == [i]
        assert counts == {stream: len(await seqs(store, stream)) for stream in streams}
        assert counts[streams[0]] == 260 and counts[streams[19]] == 260 - 87
        log.append_encoded_many(streams[0], "TEXT_DELTA", ['"requestId":"r_m0"}'] * 100)
        await log.flush()
        chooser = random.Random(11)
        for _ in range(30):
            stream = chooser.choice(streams)
            after, limit = chooser.randrange(-1, 400), chooser.choice([1, 5, 64, 4096])
            last = counts[stream] + (100 if stream == streams[0] else 0) - 1
            got = await log.read_after(stream, after, limit)
            assert [e.seq for e in got] == list(range(after + 1, min(last, after + limit) + 1))
        log.append_nowait(delta(streams[3], "lost"))  # not durable when the process dies
        place.crash(store)

        store = place.open()
        for stream in streams:
            expected = counts[stream] + (100 if stream == streams[0] else 0)
            assert await seqs(store, stream) == list(range(expected)), stream
            assert await store.events.last_seq(stream) == expected - 1
            texts = [
                json.loads(e.payload).get("data", {}).get("text")
                for e in await store.events.read_after(stream, -1)
            ]
            assert texts[: counts[stream]] == [f"{stream}:{n}" for n in range(counts[stream])]
        await store.events.open(streams[1])
        assert store.events.append_nowait(delta(streams[1], "next")) == 260
        await store.events.flush()
        got = await follow_until(store, streams[1], 250, 260)
        assert [row[0] for row in got] == list(range(251, 261))
        store.close()

    async def test_followers_fast_and_slow_get_every_event_once(self, place: Place) -> None:
        # A follower that starts far behind reads the backend, then joins the live tail.
        store = place.open()
        log = store.events
        await log.open("r_f")
        fast = asyncio.create_task(follow_until(store, "r_f", -1, 29_999))
        await asyncio.sleep(0)
        for i in range(20_000):
            log.append_nowait(delta("r_f", str(i)))
        await log.flush()
        slow = asyncio.create_task(follow_until(store, "r_f", 99, 29_999))
        for i in range(20_000, 30_000):
            log.append_nowait(delta("r_f", str(i)))
            if i % 1000 == 0:
                await asyncio.sleep(0)
        await log.flush()
        got_fast, got_slow = await asyncio.wait_for(asyncio.gather(fast, slow), TIMEOUT)
        assert [row[0] for row in got_fast] == list(range(30_000))
        assert [row[0] for row in got_slow] == list(range(100, 30_000))
        assert got_slow[-1] == got_fast[-1]
        store.close()

    async def test_terminal_event_and_run_status_are_durable_together(self, place: Place) -> None:
        store = place.open()
        await store.records.create_run(run_record("r_t"))
        await store.events.open("r_t")
        for i in range(3):
            store.events.append_nowait(delta("r_t", str(i)))
        await store.events.flush()

        # Ended while writes fail, then the process dies: neither the event nor the status.
        place.break_writes(store)
        run = await store.records.get_run("r_t")
        assert run is not None
        store.events.append_nowait(completed("r_t"))
        run.status = "completed"
        await store.records.save_run(run, keep=True)  # kept with the event, not refused
        place.crash(store)
        store = place.open()
        assert await seqs(store, "r_t") == [0, 1, 2]
        found = await store.records.get_run("r_t")
        assert found is not None and found.status == "running"

        # Ended while writes fail, then they work again: both.
        await store.events.open("r_t")
        place.break_writes(store)
        run.status = "completed"
        assert store.events.append_nowait(completed("r_t")) == 3
        await store.records.save_run(run, keep=True)
        assert await seqs(store, "r_t") == [0, 1, 2]
        place.mend_writes(store)
        await asyncio.wait_for(store.events.flush(), TIMEOUT)
        place.crash(store)
        store = place.open()
        assert await seqs(store, "r_t") == [0, 1, 2, 3]
        found = await store.records.get_run("r_t")
        assert found is not None and found.status == "completed"
        store.close()

    async def test_a_terminal_event_and_its_status_need_no_flush(self, place: Place) -> None:
        store = place.open()
        await store.records.create_run(run_record("r_n"))
        await store.events.open("r_n")
        store.events.append_nowait(completed("r_n"))
        run = await store.records.get_run("r_n")
        assert run is not None
        run.status, run.state = "completed", {"step": 1, "phase": "done"}
        await store.records.save_run(run, keep=True)
        place.crash(store)  # nothing else was waited for
        store = place.open()
        assert await seqs(store, "r_n") == [0]
        found = await store.records.get_run("r_n")
        assert found is not None and (found.status, found.state["phase"]) == ("completed", "done")
        store.close()

    async def test_a_restart_keeps_what_was_durable_and_numbering_goes_on(
        self, place: Place
    ) -> None:
        store = place.open()
        log = store.events
        await log.open("r_r")
        for i in range(10):
            log.append_nowait(delta("r_r", str(i)))
        await log.flush()
        log.append_nowait(delta("r_r", "lost"))  # not durable when the process dies
        place.crash(store)

        store = place.open()
        assert await seqs(store, "r_r") == list(range(10))
        assert await store.events.last_seq("r_r") == 9
        await store.events.open("r_r")
        assert store.events.append_nowait(delta("r_r", "10")) == 10, "numbering goes on"
        await store.events.flush()
        store.close()  # a graceful stop writes what is pending
        store = place.open()
        assert await seqs(store, "r_r") == list(range(11))
        store.close()

    async def test_records_survive_a_restart(self, place: Place) -> None:
        store = place.open()
        records = store.records
        session = await records.get_or_create_session("alice", "notes")
        await records.create_run(run_record("r_k", session_id=session.session_id))
        user = await records.add_entry(
            session.session_id, "user", {"role": "user", "content": "hi"},
            request_id="r_k", parent_id=None,
        )  # fmt: skip
        input_id = await records.add_input("r_k", "more")
        await records.add_attachment(attachment("alice", "/a/plot.png"))
        place.crash(store)

        store = place.open()
        records = store.records
        found = await records.get_session(session.session_id)
        assert found is not None and found.leaf_entry_id == user.entry_id
        run = await records.get_run("r_k")
        assert run is not None and run.options == {"maxSteps": 3}
        assert [e.message["content"] for e in await records.entries(session.session_id)] == ["hi"]
        assert await records.pending_inputs("r_k") == [(input_id, "more")]
        assert await records.get_attachment("/a/plot.png") == attachment("alice", "/a/plot.png")
        store.close()

    async def test_writes_that_fail_are_kept_and_made_in_order_later(self, place: Place) -> None:
        store = place.open()
        log = store.events
        await log.open("r_w")
        log.append_nowait(delta("r_w", "before"))
        await log.flush()
        quiet = log.follow("r_w", 0, heartbeat=30)
        place.break_writes(store)
        for i in range(1, 2001):  # enough to need more room than the store has
            log.append_nowait(delta("r_w", f"{i} " + "x" * 200))
        notice = await asyncio.wait_for(anext(quiet), TIMEOUT)
        assert [(seq, kind) for seq, kind, _ in notice] == [(-1, "AGENT_STATUS")]
        assert json.loads(notice[0][2])["data"]["code"] == "STORAGE_UNAVAILABLE"
        assert store.unavailable is not None
        try:
            await store.records.get_or_create_session("alice", "refused")
        except StorageUnavailable:
            pass
        else:
            raise AssertionError("a record write while writes fail must be refused")
        assert await seqs(store, "r_w") == [0], "nothing is seen before it is durable"
        place.mend_writes(store)
        await asyncio.wait_for(log.flush(), TIMEOUT)
        await asyncio.wait_for(store.writable(), TIMEOUT)
        assert await seqs(store, "r_w") == list(range(2001))
        got: list[int] = []
        while not got or got[-1] < 2000:
            batch = await asyncio.wait_for(anext(quiet), TIMEOUT)
            got += [seq for seq, _, _ in batch if seq >= 0]
        assert got == list(range(1, 2001))
        await quiet.aclose()  # type: ignore[attr-defined]
        store.close()

    async def test_notebook_edits_keep_their_order_and_reverted_state_across_a_restart(
        self, place: Place
    ) -> None:
        store = place.open()
        records = store.records
        await records.create_run(run_record("r_nb", "bob"))
        await records.create_run(run_record("r_other", "bob"))
        await records.put_notebook_edit("ed_1", "r_nb", {"editId": "ed_1", "reverted": False})
        await records.put_notebook_edit("ed_2", "r_nb", {"editId": "ed_2", "reverted": False})
        await records.put_notebook_edit("ed_3", "r_other", {"editId": "ed_3"})
        await records.put_notebook_edit("ed_1", "r_nb", {"editId": "ed_1", "reverted": True})
        place.crash(store)

        store = place.open()
        records = store.records
        edits = await records.notebook_edits("r_nb")
        assert edits == [
            {"editId": "ed_1", "reverted": True},
            {"editId": "ed_2", "reverted": False},
        ]
        assert await records.get_notebook_edit("ed_3") == {"editId": "ed_3"}
        assert await records.get_notebook_edit("ed_none") is None
        assert await records.notebook_edits("r_none") == []
        store.close()

    async def test_runs_and_sessions_of_one_principal_are_not_anothers(self, place: Place) -> None:
        store = place.open()
        records = store.records
        mine = await records.get_or_create_session("alice", "work")
        theirs = await records.get_or_create_session("bob", "work")
        assert mine.session_id != theirs.session_id, "names are per principal"
        assert (await records.get_or_create_session("alice", "work")).session_id == mine.session_id
        await records.create_run(run_record("r_alice", "alice", mine.session_id))
        await records.create_run(run_record("r_bob", "bob", theirs.session_id))
        assert [r.request_id for r in await records.runs(principal="alice")] == ["r_alice"]
        assert [r.request_id for r in await records.runs(principal="bob")] == ["r_bob"]
        assert [s.session_id for s in await records.sessions("alice")] == [mine.session_id]
        assert await records.runs(session_id=mine.session_id, principal="bob") == []
        run = await records.get_run("r_bob")
        assert run is not None and run.principal == "bob", "the record says whose it is"
        await records.add_attachment(attachment("bob", "/b/data.csv"))
        found = await records.get_attachment("/b/data.csv")
        assert found is not None and found.principal == "bob"
        store.close()

    async def test_run_records(self, place: Place) -> None:
        store = place.open()
        records = store.records
        for rid in ("r_1", "r_22", "r_333"):
            await records.create_run(run_record(rid))
        assert [r.request_id for r in await records.runs()] == ["r_333", "r_22", "r_1"]
        assert [r.request_id for r in await records.runs(limit=1)] == ["r_333"]
        run = await records.get_run("r_22")
        assert run is not None and run.prompt == "hello" and not run.imported
        run.state["step"] = 2
        assert (await records.get_run("r_22")).state["step"] == 0, "a read is a copy"  # type: ignore[union-attr]
        run.status = "suspended"
        await records.save_run(run)
        again = await records.get_run("r_22")
        assert again is not None and (again.status, again.state["step"]) == ("suspended", 2)
        assert [r.request_id for r in await records.runs(status="suspended")] == ["r_22"]
        assert await records.get_run("r_missing") is None
        child = run_record("r_child")
        child.parent_request_id = "r_1"
        await records.create_run(child)
        found = await records.runs(parent_request_id="r_1")
        assert [(r.request_id, r.parent_request_id) for r in found] == [("r_child", "r_1")]
        store.close()

    async def test_the_newest_matching_runs_are_found_among_many(self, place: Place) -> None:
        store = place.open()
        records = store.records
        # 700 runs of alice's, one of them in another session and among the oldest; bob's are
        # interleaved with hers in time.
        for n in range(700):
            record = run_record(f"r_a{n}", "alice", "s_old" if n == 3 else "s_1")
            record.created = 10_000.0 + 2 * n
            record.status = "completed" if n % 100 else "failed"
            await records.create_run(record)
        for n in range(5):
            record = run_record(f"r_b{n}", "bob", "s_bob")
            record.created = 10_000.0 + 2 * 600 + 2 * n + 1
            await records.create_run(record)
        newest = [r.request_id for r in await records.runs(principal="alice", limit=3)]
        assert newest == ["r_a699", "r_a698", "r_a697"]
        assert [r.request_id for r in await records.runs(session_id="s_old")] == ["r_a3"]
        failed = await records.runs(principal="alice", status="failed", limit=5)
        assert [r.request_id for r in failed] == [f"r_a{n}" for n in (600, 500, 400, 300, 200)]
        everyone = [r.request_id for r in await records.runs(limit=200)]
        assert len(everyone) == 200 and everyone[:3] == ["r_a699", "r_a698", "r_a697"]
        interleaved = ["r_a605", "r_b4", "r_a604", "r_b3", "r_a603", "r_b2", "r_a602", "r_b1"]
        assert everyone[94:102] == interleaved and everyone[102:105] == ["r_a601", "r_b0", "r_a600"]
        assert len(await records.runs(principal="alice", limit=1000)) == 700
        store.close()

    async def test_session_trees(self, place: Place) -> None:
        store = place.open()
        records = store.records
        session = await records.get_or_create_session("alice", "tree")
        sid = session.session_id
        first = await records.add_entry(
            sid, "user", {"role": "user", "content": "q"}, request_id="r_1", parent_id=None
        )
        second = await records.add_entry(
            sid, "assistant", {"role": "assistant", "content": "a"},
            request_id="r_1", parent_id=first.entry_id,
        )  # fmt: skip
        await records.update_entry(second.entry_id, {"role": "assistant", "content": "a2"})
        assert [e.message["content"] for e in await records.path(sid, second.entry_id)] == [
            "q",
            "a2",
        ]
        kept = await records.get_entry(second.entry_id)
        assert kept is not None and kept.message["content"] == "a2"
        leaf = await records.replace_path(
            sid, {"role": "user", "content": "summary"}, [kept], "r_2"
        )
        found = await records.get_session(sid)
        assert found is not None and found.leaf_entry_id == leaf.entry_id
        assert [e.message["content"] for e in await records.path(sid, leaf.entry_id)] == [
            "summary",
            "a2",
        ]
        assert len(await records.entries(sid)) == 4, "the old branch stays in the tree"
        aside = await records.add_entry(
            sid, "subagent", {"role": "subagent", "content": "part"},
            request_id="r_3", parent_id=leaf.entry_id, move_leaf=False,
        )  # fmt: skip
        branch = await records.replace_path(sid, {"content": "s"}, [], "r_3", move_leaf=False)
        found = await records.get_session(sid)
        assert found is not None and found.leaf_entry_id == leaf.entry_id, "a branch aside"
        assert {aside.entry_id, branch.entry_id} <= {e.entry_id for e in await records.entries(sid)}
        await records.set_leaf(sid, first.entry_id)
        await records.allow_always(sid, "python")
        await records.allow_always(sid, "python")
        await records.set_todo(sid, [{"text": "plot", "done": False}])
        await records.set_thinking_level(sid, "high")
        totals = await records.add_usage(sid, 10, 5, False)
        totals = await records.add_usage(sid, 1, 2, True)
        assert (totals.input_tokens, totals.output_tokens, totals.has_unknown_usage) == (
            11,
            7,
            True,
        )
        found = await records.get_session(sid)
        assert found is not None
        assert found.leaf_entry_id == first.entry_id
        assert found.always_allow == ["python"]
        assert found.todo == [{"text": "plot", "done": False}]
        assert found.thinking_level == "high"
        assert (await records.get_entry(first.entry_id)) == first
        store.close()

    async def test_supplementary_inputs(self, place: Place) -> None:
        store = place.open()
        records = store.records
        one = await records.add_input("r_i", "first")
        two = await records.add_input("r_i", "second")
        await records.add_input("r_other", "elsewhere")
        assert await records.pending_inputs("r_i") == [(one, "first"), (two, "second")]
        await records.mark_input_consumed(one)
        assert await records.pending_inputs("r_i") == [(two, "second")]
        store.close()


def attachment(principal: str, virtual_path: str) -> AttachmentRecord:
    return AttachmentRecord(
        attachment_id=f"a_{principal}",
        principal=principal,
        session_id="s_1",
        request_id="r_1",
        virtual_path=virtual_path,
        file_name=virtual_path.rsplit("/", 1)[-1],
        content_type="image/png",
        file_size=3,
        disk_path=f"/tmp/{principal}",
    )
