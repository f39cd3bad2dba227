"""The crews of one runtime: start, control, decide, and carry them over a restart.

Every control is idempotent and answered with the status it left the crew in: pausing a paused
crew, or deciding an escalation already decided, changes nothing and says so (``applied``
false), which is how a control sent from two clients is applied once.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, Literal

from ..providers import UnknownModel
from ..runtime import RunApiError, RunNotFound
from ..store import new_id
from .controls import pause, resume, retry, stop
from .decisions import decide
from .definition import CrewDefinition, CrewDefinitionError, resolve_inputs
from .log import (
    ENDED_CREW,
    INDEX_STREAM,
    CrewLog,
    CrewState,
    TaskState,
    load,
)
from .orchestrator import CrewRun
from .recovery import recovered

if TYPE_CHECKING:
    from ..runtime import Runtime

Action = Literal["pause", "resume", "stop", "retry", "decide"]


class CrewNotFound(RunNotFound):
    """No crew by that id for this principal."""

    code = "CREW_NOT_FOUND"


class CrewEventsExpired(RunApiError):
    """The crew ended long enough ago that its log, its only record, was deleted."""

    status = 410
    code = "EVENTS_EXPIRED"


class Crews:
    """Owns the crew runs of one process."""

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self._crews: dict[str, CrewRun] = {}

    # --- starting

    def check(self, definition: CrewDefinition, inputs: dict[str, str]) -> dict[str, str]:
        """The input values; refused (CrewDefinitionError) if anything would fail to start."""
        values = resolve_inputs(definition, inputs)
        known = set(self.rt.tools.names())
        for index, agent in enumerate(definition.agents):
            try:
                self.rt.models.resolve(agent.model or self.rt.config.default_model)
            except UnknownModel as exc:
                raise CrewDefinitionError(str(exc), field=f"agents[{index}].model") from exc
            if unknown := sorted(set(agent.tools or []) - known):
                raise CrewDefinitionError(
                    f"unknown tool {unknown[0]!r}; tools: {', '.join(sorted(known))}",
                    field=f"agents[{index}].tools",
                )
        return values

    async def start(
        self,
        principal: str,
        definition: CrewDefinition,
        inputs: dict[str, str],
        *,
        approve: str = "ask",
    ) -> CrewState:
        """A new crew run, started: its first tasks are running when this returns.

        Refused (429 ``RUN_QUOTA_EXCEEDED``) while the principal has as many runs going as a
        user may: its tasks are runs of theirs.
        """
        values = self.check(definition, inputs)
        async with self.rt.quota.starting(principal, await self.rt.running_count(principal)):
            return await self._start(principal, definition, values, approve)

    async def _start(
        self, principal: str, definition: CrewDefinition, values: dict[str, str], approve: str
    ) -> CrewState:
        state = CrewState(
            request_id=new_id("crew"),
            principal=principal,
            created=time.time(),
            definition=definition,
            inputs=values,
            approve=approve,
        )
        log = CrewLog(self.rt.store.events, state)
        await log.open()
        log.run_status(
            "queued",
            f"{len(definition.tasks)} tasks",
            definition=definition.model_dump(mode="json"),
            inputs=values,
            principal=principal,
            created=state.created,
            approve=approve,
        )
        for task in definition.tasks:
            log.task(TaskState(task_id=task.id, agent=task.agent))
        log.indexed()
        crew = self._crews[state.request_id] = CrewRun(self.rt, log)
        async with crew.lock:
            log.run_status("running")
            await crew.advance()
        await log.flush()
        return state

    # --- finding

    async def get(self, principal: str, request_id: str) -> CrewRun:
        """The principal's crew (another principal's crew does not exist for them)."""
        events = self.rt.store.events
        crew = self._crews.get(request_id)
        if crew is not None and crew.state.ended and await events.stored_last_seq(request_id) < 0:
            del self._crews[request_id]  # its log expired since: what is kept here went with it
            crew = None
        if crew is None:
            state = await load(events, request_id)
            if state is not None:
                log = CrewLog(events, state)
                await log.open()
                crew = self._crews.setdefault(request_id, CrewRun(self.rt, log))
        if crew is None and (await self._indexed()).get(request_id) == (principal, True):
            raise CrewEventsExpired(
                f"the log of crew {request_id} was deleted once the time it is kept after the "
                "crew ended had passed; the runs of its tasks are kept as long as runs are"
            )
        if crew is None or crew.state.principal != principal:
            raise CrewNotFound(f"no crew with requestId {request_id!r}")
        return crew

    async def summaries(self, principal: str) -> list[dict[str, Any]]:
        """The principal's crews, newest first."""
        out = []
        for crew_id, (owner, _ended) in (await self._indexed()).items():
            if owner == principal:
                try:
                    out.append((await self.get(principal, crew_id)).state.summary())
                except CrewEventsExpired:
                    continue  # nothing of it is left to show
        return sorted(out, key=lambda s: s["requestId"], reverse=True)

    async def _indexed(self) -> dict[str, tuple[str, bool]]:
        """Every crew made: its principal, and whether it has ended (in the order made)."""
        events, after = self.rt.store.events, -1
        found: dict[str, tuple[str, bool]] = {}
        while page := await events.read_after(INDEX_STREAM, after, 4096):
            for event in page:
                data = json.loads(event.payload).get("data") or {}
                found[str(data.get("crewId"))] = (
                    str(data.get("principal")),
                    bool(data.get("ended")),
                )
            after = page[-1].seq
        return found

    # --- controlling

    async def control(
        self, principal: str, request_id: str, action: Action, **fields: Any
    ) -> dict[str, Any]:
        """Apply one control; the crew's status after it, and whether it changed anything."""
        crew = await self.get(principal, request_id)
        async with crew.lock:
            before = crew.log.changes
            match action:
                case "pause":
                    await pause(crew)
                case "resume":
                    await resume(crew)
                case "stop":
                    await stop(crew)
                case "retry":
                    await retry(crew, fields.get("task_id"))
                case "decide":
                    await decide(crew, **fields)
            applied = crew.log.changes != before
        await crew.log.flush()
        return {**crew.state.summary(), "action": action, "applied": applied}

    # --- lifecycle

    async def recover(self) -> int:
        """At start-up: crews a crash or a shutdown left going wait, consistent; how many."""
        count = 0
        for crew_id, (principal, ended) in (await self._indexed()).items():
            if ended:
                continue
            crew = await self.get(principal, crew_id)
            if crew.state.status in ENDED_CREW:
                continue
            # No waiting for durability: at start-up there may be no event loop yet (the store
            # writes what is queued with the runtime's own recovery).
            async with crew.lock:
                await recovered(crew)
            count += 1
        return count

    async def shutdown(self) -> None:
        """Suspend every crew that runs: its tasks go on from where they were when resumed."""
        for crew in self._crews.values():
            async with crew.lock:
                await crew.stop_all_watching()
                if crew.state.ended:
                    continue
                for task in crew.state.tasks.values():
                    if task.status in ("running", "retrying"):
                        task.status = "ready"
                        crew.log.task(task)
                if crew.state.status in ("running", "waiting", "queued"):
                    crew.log.run_status("paused", "the server shut down: resume to continue")
        await self.rt.store.events.flush()
