"""A crew's log folds back into its state: what this version writes, and what earlier ones wrote."""

from __future__ import annotations

import json
from typing import Any

from neta_jupyter.crews import CrewDefinition
from neta_jupyter.crews.log import CrewState
from neta_jupyter.store import StoredEvent

DEFINITION = {
    "name": "two",
    "agents": [{"name": "analyst", "role": "the analyst"}],
    "tasks": [{"id": "load", "agent": "analyst", "description": "Load it"}],
}


def _state() -> CrewState:
    return CrewState(
        request_id="crew_1",
        principal="ana",
        created=1.0,
        definition=CrewDefinition.model_validate(DEFINITION),
        inputs={},
    )


def _stored(seq: int, event_type: str, data: dict[str, Any]) -> StoredEvent:
    envelope = {"eventType": event_type, "seq": seq, "requestId": "crew_1", "data": data}
    return StoredEvent(seq, event_type, json.dumps(envelope))


def test_a_log_written_before_its_bodies_had_a_type_folds_as_it_did() -> None:
    """Earlier versions wrote crew events without ``data.type``: they still fold back."""
    state = _state()
    for event in (
        _stored(0, "crew:run:status", {"status": "waiting", "message": "1 decision"}),
        _stored(1, "crew:task:status", {"taskId": "load", "agent": "analyst", "attempt": 2}),
        _stored(
            2,
            "crew:escalation",
            {"escalationId": "esc_1", "taskId": "load", "kind": "question", "message": "Which?"},
        ),
        _stored(3, "crew:log", {"source": "load", "line": "started", "at": 2.0}),
    ):
        state.apply(event)
    assert (state.status, state.message, state.seq) == ("waiting", "1 decision", 3)
    assert state.tasks["load"].attempt == 2 and state.tasks["load"].status == "pending"
    assert [e.escalation_id for e in state.open_escalations()] == ["esc_1"]


def test_what_the_log_folds_is_changed_in_place_and_written_whole_again() -> None:
    state = _state()
    state.apply(
        _stored(0, "crew:task:status", {"type": "crew_task", "taskId": "load", "agent": "a"})
    )
    task = state.tasks["load"]
    task.status, task.output = "completed", "done"
    assert task.model_dump(by_alias=True, exclude_none=True)["output"] == "done"
    assert state.counts() == {"completed": 1}
