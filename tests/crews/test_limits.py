"""Crew definitions at the limits: too many agents, too deep a YAML, refused with a 400 and a field."""

from __future__ import annotations

import pytest

from neta_jupyter.crews import CrewDefinitionError, checked, parse_text
from neta_jupyter.runtime import Runtime
from tests.helpers import ApiClient

MAX_AGENTS = 100
MAX_NESTING = 64
"""The documented limits (the same depth as a JSON body's)."""


def _crowd(agents: int) -> dict[str, object]:
    return {
        "agents": [{"name": f"a{i}"} for i in range(agents)],
        "tasks": [{"id": "only", "agent": "a0", "description": "say hi"}],
    }


async def test_a_crew_with_more_agents_than_the_cap_is_refused(
    api: ApiClient, runtime: Runtime
) -> None:
    response = await api.http.post(
        "neta/api/crew/run", json={"definition": _crowd(40_000), "approve": "deny"}
    )
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["errCode"] == "INVALID_CREW"
    assert "agents" in body["message"] and str(MAX_AGENTS) in body["message"]
    assert await runtime.runs.find(limit=10) == []


def test_a_duplicate_agent_is_still_named_at_the_cap() -> None:
    crowd = _crowd(MAX_AGENTS)
    crowd["agents"][-1]["name"] = "a0"  # type: ignore[index]
    with pytest.raises(CrewDefinitionError) as caught:
        checked(crowd)
    assert caught.value.field == f"agents[{MAX_AGENTS - 1}].name"


async def test_yaml_nested_deeper_than_json_bodies_may_is_a_400(api: ApiClient) -> None:
    deep = "name: x\nagents: " + "[" * 20_000 + "]" * 20_000 + "\n"
    response = await api.http.post("neta/api/crew/run", json={"definition": deep})
    assert response.status_code == 400, response.text
    assert response.json()["errCode"] == "INVALID_CREW"
    assert f"nested deeper than {MAX_NESTING} levels" in response.json()["message"]


def test_block_yaml_just_past_the_limit_is_refused_with_its_line() -> None:
    lines = ["agents:"] + [" " * (2 * i) + "-" for i in range(1, MAX_NESTING + 2)]
    with pytest.raises(CrewDefinitionError) as caught:
        parse_text("\n".join(lines) + "\n")
    assert f"nested deeper than {MAX_NESTING}" in caught.value.reason
    assert caught.value.line == MAX_NESTING + 1
