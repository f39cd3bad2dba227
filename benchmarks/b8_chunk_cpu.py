"""B8 server CPU per streamed chunk: what one more 4-character chunk of an answer costs.

Server CPU (user + system, all threads, from ``/proc``) for 20,000-chunk answers minus that for
1,000-chunk answers, divided by the difference in chunks: the fixed cost of a run (starting it,
its first and last events) cancels out. Each sample streams several answers of each length so
the difference spans many ticks of the 10 ms CPU clock. The follower is the lean SSE counter,
accepting gzip as httpx does, and the server compresses for every client (as for a remote
one: ``stream_compression = "always"``). Baseline: the bare server's CPU per event sending the
same frames.
"""

from __future__ import annotations

from .clients import sse_count
from .harness import NetaServer, Row, Settings, bare_server, http_client, neta_server

SHORT, LONG = 1_000, 20_000
ANSWERS = 5
"""Answers of each length per sample: 5 x 19,000 chunks x ~3 µs is about 30 ticks."""
TARGET_US = 4.0


async def _cpu(server: NetaServer, chunks: int, answers: int) -> tuple[float, str]:
    """Server CPU seconds for ``answers`` runs of ``chunks`` chunks, each followed to its end."""
    async with http_client() as client:
        models = [server.script(chunks) for _ in range(answers)]
        before = server.cpu()
        for model in models:
            rid = await server.start_run(client, model)
            await sse_count(client, server.stream_url(), {"requestId": rid}, server.headers)
        return server.cpu() - before, rid


async def run(settings: Settings) -> list[Row]:
    short, long = settings.size(SHORT, 100), settings.size(LONG, 2_000)
    answers = settings.size(ANSWERS, 1)
    samples: list[float] = []
    with neta_server(settings, stream_compression="always") as server:
        await _cpu(server, 100, 1)  # warm up: imports and first-use caches
        for _ in range(settings.repeats):
            small, _ = await _cpu(server, short, answers)
            big, rid = await _cpu(server, long, answers)
            samples.append((big - small) / ((long - short) * answers) * 1e6)
        frames = server.stored_frames(rid)
    baseline: list[float] = []
    with bare_server(settings) as bare:
        bare.load("b8", frames)
        async with http_client() as client:
            times = max(5, 400_000 // len(frames))
            for _ in range(settings.repeats):
                before = bare.cpu()
                for _ in range(times):
                    await sse_count(client, bare.base + "sse", {"name": "b8"})
                baseline.append((bare.cpu() - before) / (times * len(frames)) * 1e6)
    row = Row(
        f"B8 server CPU per streamed chunk ({long:,}- minus {short:,}-chunk answers)",
        "µs",
        samples,
        baseline,
        target=f"<= {TARGET_US:g} µs",
    )
    row.met = (row.median or 0) <= TARGET_US
    return [row]
