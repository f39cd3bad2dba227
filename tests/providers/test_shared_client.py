"""Models given no HTTP client share one per event loop: made once, not at every model call.

Making an httpx client loads the CA certificates (tens of milliseconds on the loop's thread, which
every stream on the server waits through); one client also keeps its connections to the provider.
"""

from __future__ import annotations

import asyncio

from neta_jupyter.providers._http import shared_client


async def _twice() -> tuple[object, object]:
    return shared_client(), shared_client()


def test_one_client_per_loop_and_a_new_one_once_it_is_closed() -> None:
    first, again = asyncio.run(_twice())
    assert first is again
    other, _ = asyncio.run(_twice())
    assert other is not first

    async def closed_then_asked() -> None:
        client = shared_client()
        await client.aclose()
        fresh = shared_client()
        assert fresh is not client and not fresh.is_closed

    asyncio.run(closed_then_asked())
