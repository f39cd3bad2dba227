"""The run-API client over both transports: a real server (HTTP, SSE) and its runtime in-process."""

from __future__ import annotations

import asyncio
import inspect
import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import pytest
from pydantic.alias_generators import to_camel

import neta_jupyter.client as client_package
from neta_jupyter.client import (
    BadRequest,
    Call,
    ClientError,
    Conflict,
    HttpTransport,
    InProcessTransport,
    NotFound,
    OutOfRange,
    PayloadTooLarge,
    Received,
    Refused,
    RunClient,
    RunRequest,
    StreamInterrupted,
    StreamLost,
    Unauthorized,
    Unreachable,
)
from neta_jupyter.client.mock import MockTransport
from neta_jupyter.providers import ScriptedModel, ScriptedToolCall, ScriptedTurn
from neta_jupyter.runtime import Runtime
from tests.helpers import stored

T = TypeVar("T")
TRANSPORTS = ["http", "in-process"]


@pytest.fixture
def neta_config() -> dict[str, Any]:
    return {
        "permission_rules": [
            {"tool": "read_file", "action": "ask", "description": "reading files needs approval"}
        ],
        "max_body_bytes": 100_000,
        "max_attachment_bytes": 50_000,
    }


@pytest.fixture
def over_http(
    server_url: str, jp_auth_header: dict[str, str], jp_asyncio_loop: Any
) -> Iterator[RunClient]:
    transport = HttpTransport(server_url, headers=jp_auth_header, trust_env=False)
    client = RunClient(transport, retry_delay=0.01)
    yield client
    jp_asyncio_loop.run_until_complete(client.aclose())


@pytest.fixture
def in_process(runtime: Runtime) -> RunClient:
    # The server's own runtime, as the owner its token stands for: both clients see the same runs.
    return RunClient(InProcessTransport(runtime, "owner"))


@pytest.fixture(params=TRANSPORTS)
def client(request: pytest.FixtureRequest) -> RunClient:
    name = "over_http" if request.param == "http" else "in_process"
    value: RunClient = request.getfixturevalue(name)
    return value


async def query(client: RunClient, ask: Callable[[], T]) -> T:
    """A blocking query; over HTTP off the loop, which is also the test server's."""
    if isinstance(client.transport, HttpTransport):
        return await asyncio.to_thread(ask)
    return ask()


async def followed(client: RunClient, rid: str, after: int = -1) -> list[Received]:
    return [item async for item in client.follow(rid, after)]


def script(runtime: Runtime, name: str, *turns: ScriptedTurn) -> str:
    runtime.models.register(name, ScriptedModel(list(turns)))
    return name


def test_the_public_surface_is_what_we_mean_to_export() -> None:
    assert set(client_package.__all__) == {
        "RECONNECTS",
        "BadRequest",
        "Call",
        "ClientError",
        "Conflict",
        "Gone",
        "HttpTransport",
        "InProcessTransport",
        "InvalidAnswer",
        "NotFound",
        "OutOfRange",
        "PayloadTooLarge",
        "Received",
        "Refused",
        "RunClient",
        "RunRequest",
        "ServerError",
        "Started",
        "StreamInterrupted",
        "StreamLost",
        "Transport",
        "TransportError",
        "Unauthorized",
        "Unreachable",
        "attachment_sources",
        "refusal",
    }
    for name in client_package.__all__:
        assert getattr(client_package, name) is not None


# --- start, follow, resume -------------------------------------------------------------------


@pytest.mark.parametrize("client", TRANSPORTS, indirect=True)
async def test_start_then_follow_delivers_the_log_and_resumes_exactly(
    client: RunClient, runtime: Runtime
) -> None:
    model = script(runtime, "words", ScriptedTurn(text=[f"w{i} " for i in range(40)]))
    started = await client.start(RunRequest(content="say many words", model=model))
    assert started.request_id.startswith("r_") and started.status == "running"

    items = await followed(client, started.request_id)
    assert [i.seq for i in items] == list(range(len(items)))
    assert [i.payload for i in items] == await stored(runtime, started.request_id)
    assert items[-1].event_type == "MESSAGE_COMPLETED" and items[-1].terminal
    assert sum(i.terminal for i in items) == 1
    assert items[0].envelope()["requestId"] == started.request_id

    # Resuming from any seen event delivers exactly the rest.
    for k in (0, 17, len(items) - 2):
        rest = await followed(client, started.request_id, after=k)
        assert [i.seq for i in rest] == list(range(k + 1, len(items)))
        assert [i.payload for i in rest] == [i.payload for i in items[k + 1 :]]
    # After the terminal event of a run at rest nothing comes, and nothing waits.
    assert await followed(client, started.request_id, after=items[-1].seq) == []


@pytest.mark.parametrize("client", TRANSPORTS, indirect=True)
async def test_a_permission_ask_is_answered_and_followed_to_the_end(
    client: RunClient, runtime: Runtime, jp_root_dir: Any
) -> None:
    (jp_root_dir / "notes.txt").write_text("revenue grew 12%\n")
    model = script(
        runtime,
        "reader",
        ScriptedTurn(tool_calls=[ScriptedToolCall("read_file", {"path": "notes.txt"})]),
        ScriptedTurn(text="It grew 12%."),
    )
    started = await client.start(RunRequest(content="read notes.txt", model=model))
    first = await followed(client, started.request_id)
    assert first[-1].event_type == "MESSAGE_SUSPENDED"
    ask = next(i.envelope() for i in first if i.event_type == "PERMISSION_ASK")["data"]
    with pytest.raises(Conflict) as mismatch:
        await client.resume(started.request_id, approved=True, ask_id="not-the-ask")
    assert mismatch.value.code == "ASK_MISMATCH" and mismatch.value.status == 409
    with pytest.raises(BadRequest) as undecided:
        await client.resume(started.request_id, ask_id=ask["askId"])
    assert undecided.value.code == "APPROVED_REQUIRED"

    status = await client.resume(started.request_id, approved=True, ask_id=ask["askId"])
    assert status == "running"
    second = await followed(client, started.request_id, after=first[-1].seq)
    assert second[0].seq == first[-1].seq + 1
    assert second[-1].event_type == "MESSAGE_COMPLETED"
    assert [i.payload for i in first + second] == await stored(runtime, started.request_id)


# --- a stream cut at random points ----------------------------------------------------------


class CuttingProxy:
    """A TCP proxy to the server that cuts each connection after its byte budget.

    The budgets apply to the answers, in the order the connections arrive; connections past the
    last budget pass untouched.
    """

    def __init__(self, port: int, budgets: list[int]) -> None:
        self.upstream = port
        self.budgets = list(budgets)
        self.connections = 0
        self.cut = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        budget = self.budgets.pop(0) if self.budgets else None
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)

        async def requests() -> None:
            while data := await reader.read(65536):
                up_writer.write(data)
                await up_writer.drain()

        async def answers() -> None:
            left = budget
            while data := await up_reader.read(65536):
                if left is not None and len(data) >= left:
                    writer.write(data[:left])
                    await writer.drain()
                    self.cut += 1
                    return
                if left is not None:
                    left -= len(data)
                writer.write(data)
                await writer.drain()

        pump = asyncio.ensure_future(requests())
        try:
            await answers()
        except ConnectionError:
            pass
        finally:
            pump.cancel()
            for w in (writer, up_writer):
                w.close()

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()


async def test_following_over_http_survives_cut_connections_with_exact_resume(
    runtime: Runtime, server_url: str, jp_auth_header: dict[str, str], over_http: RunClient
) -> None:
    deltas = [f"t{i} " for i in range(3000)]
    model = script(runtime, "long", ScriptedTurn(text=deltas, delay=0.0002))
    rng = random.Random(7)
    # Bytes per connection before the cut: the stream is plain to a client on this machine
    # (about 200 bytes a delta), so the cuts come in the first few hundred deltas.
    proxy = CuttingProxy(
        urlsplit(server_url).port or 80, [rng.randint(400, 4000) for _ in range(25)]
    )
    address = await proxy.start()
    parts = urlsplit(server_url)
    through = RunClient(
        HttpTransport(
            parts._replace(netloc=address).geturl(), headers=jp_auth_header, trust_env=False
        ),
        retry_delay=0.01,
    )
    try:
        started = await over_http.start(RunRequest(content="stream a lot", model=model))
        items = await followed(through, started.request_id)
    finally:
        await through.aclose()
        await proxy.stop()
    assert proxy.cut == 25 and proxy.connections > 25
    assert [i.seq for i in items] == list(range(len(items)))
    assert len(items) > 3000 and items[-1].event_type == "MESSAGE_COMPLETED"
    assert [i.payload for i in items] == await stored(runtime, started.request_id)


# --- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize("client", TRANSPORTS, indirect=True)
async def test_refusals_become_typed_errors_with_status_and_code(
    client: RunClient, runtime: Runtime
) -> None:
    done = await client.start(RunRequest(content="hello"))
    items = await followed(client, done.request_id)
    imported = await runtime.import_run("owner", "history", "old question", "old answer")

    async def refused(action: Any) -> Refused:
        with pytest.raises(Refused) as caught:
            await action()
        return caught.value

    cases: list[tuple[Any, type[Refused], int, str]] = [
        (lambda: query(client, lambda: client.status("r_nope")), NotFound, 404, "RUN_NOT_FOUND"),
        (lambda: followed(client, "r_nope"), NotFound, 404, "RUN_NOT_FOUND"),
        (
            lambda: query(client, lambda: client.tree("s_nope")),
            NotFound,
            404,
            "SESSION_NOT_FOUND",
        ),
        (
            lambda: client.start(RunRequest(content="hi", model="nope")),
            BadRequest,
            400,
            "UNKNOWN_MODEL",
        ),
        (lambda: client.resume(done.request_id), Conflict, 409, "RUN_NOT_SUSPENDED"),
        (lambda: client.terminate(done.request_id), Conflict, 409, "RUN_NOT_ACTIVE"),
        (lambda: client.retry(done.request_id), Conflict, 409, "RUN_NOT_RETRYABLE"),
        (
            lambda: followed(client, done.request_id, after=items[-1].seq + 5),
            OutOfRange,
            416,
            "LAST_EVENT_ID_OUT_OF_RANGE",
        ),
        (lambda: followed(client, imported.request_id), Conflict, 409, "IMPORTED_RUN"),
    ]
    for action, kind, status, code in cases:
        error = await refused(action)
        assert type(error) is kind, (code, error)
        assert (error.status, error.code) == (status, code)
        assert error.message and isinstance(error, ClientError)


async def test_http_only_refusals_and_an_unreachable_server(
    server_url: str, over_http: RunClient
) -> None:
    wrong = RunClient(
        HttpTransport(server_url, headers={"Authorization": "token wrong"}, trust_env=False)
    )
    try:
        with pytest.raises(Unauthorized) as denied:
            await wrong.start(RunRequest(content="hi"))
        assert denied.value.status == 403
    finally:
        await wrong.aclose()
    with pytest.raises(PayloadTooLarge) as large:
        await over_http.start(RunRequest(content="x" * 200_000))
    assert large.value.code == "BODY_TOO_LARGE"

    nowhere = RunClient(
        HttpTransport("http://127.0.0.1:9/", trust_env=False), reconnects=2, retry_delay=0.01
    )
    try:
        with pytest.raises(Unreachable) as unreachable:
            await nowhere.start(RunRequest(content="hi"))
        assert (
            unreachable.value.code == "UNREACHABLE" and "127.0.0.1:9" in unreachable.value.message
        )
        with pytest.raises(StreamLost):
            await followed(nowhere, "r_any")
    finally:
        await nowhere.aclose()


# --- the two transports agree ----------------------------------------------------------------


async def test_both_transports_answer_queries_alike(
    over_http: RunClient, in_process: RunClient
) -> None:
    started = await in_process.start(RunRequest(content="hello", session_name="alike"))
    await followed(in_process, started.request_id)
    compared: list[Callable[[RunClient], Any]] = [
        lambda c: c.status(started.request_id),
        lambda c: c.runs(started.session_id),
        lambda c: c.runs(),
        lambda c: c.sessions(),
        lambda c: c.tree(started.session_id),
        lambda c: c.models(),
    ]
    for ask in compared:
        here = ask(in_process)
        there = await asyncio.to_thread(ask, over_http)
        assert here == there
    assert here["models"]


# --- following policy, against a scripted transport ------------------------------------------


def events(*seqs: int, terminal_at: int | None = None) -> list[Received]:
    return [
        Received(s, "MESSAGE_COMPLETED" if s == terminal_at else "TEXT_DELTA", f'{{"seq":{s}}}')
        for s in seqs
    ]


async def test_follow_drops_repeats_and_reconnects_after_a_gap() -> None:
    deliveries: dict[int, list[Received | Exception]] = {
        -1: [*events(0, 1, 2), StreamInterrupted("cut")],
        2: events(1, 2, 3, 5),  # replays two it had, then skips 4
        3: events(4, 5, terminal_at=5),
    }
    transport = MockTransport(connect=lambda rid, after: deliveries.get(after, []))
    got = await followed(RunClient(transport, retry_delay=0), "r_1")
    assert [i.seq for i in got] == [0, 1, 2, 3, 4, 5]
    # The repeats were dropped within the connection; the gap ended it, resumed after 3.
    assert transport.connections == [-1, 2, 3]


async def test_follow_gives_up_after_reconnects_without_progress() -> None:
    transport = MockTransport(connect=lambda rid, after: [StreamInterrupted("cut")])
    with pytest.raises(StreamLost) as lost:
        await followed(RunClient(transport, reconnects=3, retry_delay=0), "r_1")
    assert "r_1" in lost.value.message and transport.connections == [-1, -1, -1, -1]

    # Progress resets the count: a stream cut after every event still gets through.
    def one_then_cut(rid: str, after: int) -> list[Received | Exception]:
        seq = after + 1
        return (
            events(seq, terminal_at=seq) if seq == 6 else [*events(seq), StreamInterrupted("cut")]
        )

    transport = MockTransport(connect=one_then_cut)
    got = await followed(RunClient(transport, reconnects=1, retry_delay=0), "r_1")
    assert [i.seq for i in got] == [0, 1, 2, 3, 4, 5, 6] and got[-1].terminal


async def test_mock_transport_records_calls_and_answers() -> None:
    transport = MockTransport(
        answer=lambda call: {"requestId": "r_1", "sessionId": "s_1", "status": "running"}
    )
    client = RunClient(transport)
    started = await client.start(RunRequest(content="hi", max_steps=3, tools=["read_file"]))
    assert started.request_id == "r_1"
    assert transport.calls == [
        Call(
            "POST",
            "agent/run/async",
            {
                "content": "hi",
                "virtualTools": [],
                "tools": ["read_file"],
                "maxSteps": 3,
                "approve": "ask",
            },
        )
    ]
    assert json.loads(events(0)[0].payload) == {"seq": 0}
    with pytest.raises(ClientError):
        await RunClient(MockTransport(answer=lambda call: {})).start(RunRequest(content="hi"))


# --- one request model -----------------------------------------------------------------------

SAMPLES: dict[str, Any] = {
    "session_name": "every option",
    "model": "demo",
    "virtual_tools": [{"name": "chart", "description": "draws", "mockResponse": "drawn"}],
    "tools": ["read_file", "chart"],
    "max_steps": 3,
    "approve": "deny",
    "kernel_id": "k-sample",
    "notebook_path": "work/analysis.ipynb",
    "thinking_level": "low",
    "kernel_variables": ["df: DataFrame (3, 2)"],
    "suspend_timeout": 600.0,
    # Nothing listens on port 9: the run fails as it imports this, after it was created.
    "attachments": [{"url": "http://127.0.0.1:9/sample.csv"}],
    "origin": "panel",
}
"""A value for every run option; a new option needs one here, and is then checked end to end."""


def test_the_start_request_is_one_model_for_server_client_runtime_and_document() -> None:
    from neta_jupyter.runtime.actions import action_named
    from neta_jupyter.server import openapi, routes, schemas

    # REST, the WebSocket's chat and the in-process transport all read the action's model: the
    # run's options and, for where the conversation goes on, the entry to continue from.
    request = action_named("start").request
    assert schemas.RunRequest is RunRequest and issubclass(request, RunRequest)
    assert set(request.model_fields) == set(RunRequest.model_fields) | {"leaf_entry_id"}
    start = next(r for r in routes.ROUTES if r.path == "agent/run/async")
    assert start.operations[0].body is request
    documented = openapi.document()["components"]["schemas"][request.__name__]
    own = request.model_json_schema(by_alias=True, ref_template="#/components/schemas/{model}")
    aliases = {field.alias or name for name, field in request.model_fields.items()}
    assert set(documented["properties"]) == aliases
    for alias in aliases:
        assert documented["properties"][alias] == own["properties"][alias], alias
    assert documented.get("required") == ["content"]
    # Every option is a keyword of Runtime.start, so a transport passes it on by name.
    parameters = inspect.signature(Runtime.start).parameters
    keywords = {n for n, p in parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert keywords == set(RunRequest.model_fields) - {"content"}
    assert set(SAMPLES) == set(RunRequest.model_fields) - {"content", "session_id"}


@pytest.mark.parametrize("client", TRANSPORTS, indirect=True)
async def test_every_run_option_reaches_the_run_through_either_transport(
    client: RunClient, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The sample kernel and notebook are names, not a kernel and a notebook of the server: what a
    # request may name is checked in test_notebook_path; here every option travels as given.
    monkeypatch.setattr(runtime, "targets", None)
    request = RunRequest(content="hello with every option", **SAMPLES)
    started = await client.start(request)
    run = await runtime.store.records.get_run(started.request_id)
    assert run is not None and run.prompt == request.content and run.model == "demo"
    session = await runtime.store.records.get_session(started.session_id)
    assert session is not None and session.name == SAMPLES["session_name"]
    sent = request.start_options()
    for name in set(sent) - {"session_id", "session_name", "model"}:
        assert run.options[to_camel(name)] == sent[name], name
    await followed(client, started.request_id)
    # sessionId continues the same conversation.
    again = await client.start(RunRequest(content="and again", session_id=started.session_id))
    assert again.session_id == started.session_id
    await followed(client, again.request_id)


@pytest.mark.parametrize("client", TRANSPORTS, indirect=True)
async def test_a_local_file_is_uploaded_and_attached_through_either_transport(
    client: RunClient, runtime: Runtime, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("hello notes\n")
    uploaded = await client.upload(notes)
    assert uploaded["fileName"] == "notes.txt" and uploaded["source"] == "USER_UPLOAD"
    assert uploaded["fileSize"] == len("hello notes\n")
    started = await client.start(RunRequest(content="read my notes", approve="auto"), [notes])
    await followed(client, started.request_id)
    [prompt] = [
        e for e in await runtime.store.records.entries(started.session_id) if e.role == "user"
    ]
    [attached] = prompt.message["attachments"]
    assert (
        attached["fileName"] == "notes.txt" and attached["attachmentId"] != uploaded["attachmentId"]
    )
    big = tmp_path / "big.bin"
    big.write_bytes(b"x" * 50_001)
    with pytest.raises(PayloadTooLarge) as refused:
        await client.upload(big)
    assert refused.value.code == "ATTACHMENT_TOO_LARGE"
    with pytest.raises(ClientError, match="cannot attach"):
        await client.start(RunRequest(content="read it"), [tmp_path / "missing.txt"])
