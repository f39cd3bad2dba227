"""An MCP session is a run going: it counts towards the user's quota of runs at once."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from tests.notebook_mcp.agent import agent

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def neta_config() -> dict[str, Any]:
    return {"max_active_runs_per_user": 1}


async def test_a_session_past_the_quota_is_refused_saying_why(
    server_url: str, jp_auth_header: dict[str, str]
) -> None:
    async with agent(server_url, jp_auth_header, "first") as first:
        assert (await first.list_tools()).tools
        async with agent(server_url, jp_auth_header, "second") as second:
            with pytest.raises(MCPError, match="max_active_runs_per_user"):
                await second.list_tools()
    async with agent(server_url, jp_auth_header, "third") as third:
        assert (await third.list_tools()).tools  # the first session's run ended with it
