"""B7 long answers: server CPU time per streamed token, for a short and a long answer.

CPU is the server process's user + system time from ``/proc``, read before the run starts and
after its subscriber saw the end. Short answers are run several times per sample so each sample
covers about as many tokens as a long one (the clock ticks at 10 ms). Baseline: CPU per event of
the bare server sending the same frames. If cost per token stays flat as answers grow, the long
answer's figure is no higher than the short one's.
"""

from __future__ import annotations

from .clients import sse_count
from .harness import NetaServer, Row, Settings, bare_server, http_client, neta_server

SHORT, LONG = 1_000, 20_000
FLAT = 1.1


async def _cpu_per_token(server: NetaServer, tokens: int, runs: int) -> tuple[float, str]:
    async with http_client() as client:
        scripts = [server.script(tokens) for _ in range(runs)]
        before = server.cpu()
        for model in scripts:
            rid = await server.start_run(client, model)
            await sse_count(client, server.stream_url(), {"requestId": rid}, server.headers)
        used = server.cpu() - before
    return used / (tokens * runs) * 1e6, rid


async def run(settings: Settings) -> list[Row]:
    short, long = settings.size(SHORT, 100), settings.size(LONG, 2_000)
    per_short: list[float] = []
    per_long: list[float] = []
    with neta_server(settings) as server:
        await _cpu_per_token(server, 100, 1)  # warm up: imports and first-use caches
        for _ in range(settings.repeats):
            per_short.append((await _cpu_per_token(server, short, long // short))[0])
            cost, rid = await _cpu_per_token(server, long, 1)
            per_long.append(cost)
        frames = server.stored_frames(rid)
    bare_cost: list[float] = []
    with bare_server(settings) as bare:
        bare.load("b7", frames)
        async with http_client() as client:
            times = max(5, 400_000 // len(frames))  # enough frames for the 10 ms CPU clock
            for _ in range(settings.repeats):
                before = bare.cpu()
                for _ in range(times):
                    await sse_count(client, bare.base + "sse", {"name": "b7"})
                bare_cost.append((bare.cpu() - before) / (times * len(frames)) * 1e6)
    growth = [b / a for a, b in zip(per_short, per_long, strict=True)]
    flat = Row(
        f"B7 CPU per token, {long:,} vs {short:,}-token answer",
        "x",
        growth,
        target=f"<= {FLAT} (flat)",
    )
    flat.met = (flat.median or 0) <= FLAT
    return [
        Row(f"B7 server CPU per token, {short:,}-token answer", "µs", per_short, bare_cost),
        Row(f"B7 server CPU per token, {long:,}-token answer", "µs", per_long, bare_cost),
        flat,
    ]
