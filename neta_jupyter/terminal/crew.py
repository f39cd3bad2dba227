"""``neta-jupyter crew run``: start a crew, follow its log and decide its escalations.

The crew runs in this process (an embedded runtime, like ``neta-jupyter run``) or on a Jupyter
server (REST to start and control, SSE to follow). Each event of the crew's log is one line (or,
with ``--json``, one JSON envelope); an escalation is decided at the terminal, by ``--yes`` for
approvals, or left waiting when there is no terminal to ask.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from typing import Any, Protocol, TextIO

import httpx
from httpx_sse import aconnect_sse

from ..crew import CrewDefinition, CrewDefinitionError, load_file
from ..crew.log import ENDED_CREW, ESCALATION, LOG, RUN_STATUS, TASK_STATUS
from ..crew.manager import Crews
from ..runtime import RunApiError
from .backends import CliError, EmbeddedBackend, _user_name

Envelope = dict[str, Any]
EXIT_WAITING = 3


class CrewSide(Protocol):
    """Where the crew runs: start it, follow its log, control it."""

    async def start(self, definition: CrewDefinition, inputs: dict[str, str], approve: str) -> str:
        """The new crew's requestId."""
        ...

    def follow(self, request_id: str, after: int) -> AsyncIterator[Envelope]:
        """The crew's events after seq ``after``, live, until it ends."""
        ...

    async def control(self, request_id: str, action: str, **fields: Any) -> dict[str, Any]:
        """Apply a control; the crew's status after it."""
        ...

    async def aclose(self) -> None:
        """Let go (an embedded crew still going is paused, resumable)."""
        ...


class EmbeddedCrews:
    """The crew in this process, on the embedded runtime of ``neta-jupyter run``."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.backend = EmbeddedBackend(args)
        self.crews = Crews(self.backend.runtime)
        self.principal = _user_name()

    async def start(self, definition: CrewDefinition, inputs: dict[str, str], approve: str) -> str:
        """Start it here."""
        try:
            state = await self.crews.start(self.principal, definition, inputs, approve=approve)
        except RunApiError as exc:
            raise CliError(exc.message) from exc
        return state.request_id

    async def follow(self, request_id: str, after: int) -> AsyncIterator[Envelope]:
        """From the event log."""
        ticks = self.backend.runtime.follow(request_id, after)
        try:
            async for batch in ticks:
                for _seq, _kind, payload in batch:
                    yield json.loads(payload)
        finally:
            await ticks.aclose()  # type: ignore[attr-defined]

    async def control(self, request_id: str, action: str, **fields: Any) -> dict[str, Any]:
        """Through the crews of this process."""
        return await self.crews.control(self.principal, request_id, action, **fields)  # type: ignore[arg-type]

    async def aclose(self) -> None:
        """Pause the crew, then stop the runtime."""
        await self.crews.shutdown()
        await self.backend.aclose()


class ServerCrews:
    """The crew on a Jupyter server."""

    def __init__(self, args: argparse.Namespace) -> None:
        base = args.server if args.server.endswith("/") else args.server + "/"
        token = args.token if args.token is not None else os.environ.get("JUPYTER_TOKEN", "")
        headers = {"Authorization": f"token {token}"} if token else {}
        self.http = httpx.AsyncClient(
            base_url=base, headers=headers, timeout=httpx.Timeout(30.0, read=60.0), trust_env=False
        )

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            response = await self.http.post(path, json=body)
        except httpx.HTTPError as exc:
            raise CliError(f"cannot reach the server: {exc}") from exc
        reply = (
            response.json()
            if response.headers.get("content-type", "").startswith("application/json")
            else {}
        )
        if response.status_code != 200:
            raise CliError(f"{reply.get('message') or response.text} ({reply.get('errCode')})")
        return dict(reply)

    async def start(self, definition: CrewDefinition, inputs: dict[str, str], approve: str) -> str:
        """POST crew/run."""
        body = {"definition": definition.model_dump(mode="json"), "inputs": inputs}
        reply = await self._post("neta/api/crew/run", {**body, "approve": approve})
        return str(reply["requestId"])

    async def follow(self, request_id: str, after: int) -> AsyncIterator[Envelope]:
        """Over SSE, reconnecting after ``lastEventId`` when the stream drops."""
        while True:
            params = {"requestId": request_id, "lastEventId": str(after)}
            try:
                async with aconnect_sse(
                    self.http, "GET", "neta/api/crew/stream", params=params
                ) as src:
                    if src.response.status_code == 204:
                        return
                    async for event in src.aiter_sse():
                        if event.event == "HEARTBEAT":
                            continue
                        envelope = json.loads(event.data)
                        after = int(envelope["seq"])
                        yield envelope
                        if _ends(envelope):
                            return
            except httpx.HTTPError:
                await asyncio.sleep(1.0)

    async def control(self, request_id: str, action: str, **fields: Any) -> dict[str, Any]:
        """POST crew/control."""
        body = {"requestId": request_id, "action": action, **_camel(fields)}
        return await self._post("neta/api/crew/control", body)

    async def aclose(self) -> None:
        """Close the connection (the crew goes on on the server)."""
        await self.http.aclose()


def _camel(fields: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in fields.items():
        head, *rest = key.split("_")
        out[head + "".join(part.title() for part in rest)] = value
    return out


def _ends(envelope: Envelope) -> bool:
    data = envelope.get("data") or {}
    return envelope.get("eventType") == RUN_STATUS and data.get("status") in ENDED_CREW


def parse_inputs(pairs: list[str]) -> dict[str, str]:
    """``--input name=value`` (repeatable)."""
    inputs = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise CliError(f"--input {pair!r}: write it as NAME=VALUE")
        inputs[name.strip()] = value
    return inputs


class CrewPrinter:
    """One line per event of the crew's log; its escalations decided here."""

    def __init__(
        self, out: TextIO, definition: CrewDefinition, *, as_json: bool, assume_yes: bool, ask: bool
    ) -> None:
        self.out, self.as_json, self.assume_yes, self.ask = out, as_json, assume_yes, ask
        upstream = {d for task in definition.tasks for d in task.depends_on}
        self.last = [t.id for t in definition.tasks if t.id not in upstream]
        """The tasks nothing depends on: their outputs are the crew's result."""
        self.outputs: dict[str, str] = {}
        self.status = "queued"

    def show(self, envelope: Envelope) -> None:
        """Print one event."""
        if self.as_json:
            print(json.dumps(envelope), file=self.out, flush=True)
            return
        kind, data = envelope.get("eventType"), envelope.get("data") or {}
        line = None
        if kind == RUN_STATUS:
            self.status = data.get("status", self.status)
            counts = ", ".join(f"{n} {s}" for s, n in (data.get("counts") or {}).items())
            line = f"crew {self.status}" + (f" ({counts})" if counts else "")
            if data.get("message"):
                line += f": {data['message']}"
        elif kind == TASK_STATUS:
            line = f"  {data['taskId']}: {data['status']}"
            if data.get("attempt"):
                line += f" (attempt {data['attempt']})"
            if data["status"] in ("completed", "skipped") and data.get("output") is not None:
                self.outputs[data["taskId"]] = data["output"]
        elif kind == LOG:
            line = f"    · {data.get('source')}: {data.get('line')}"
        elif kind == ESCALATION:
            state = "waits for a decision" if data.get("state") == "open" else "decided"
            line = f"  ? {data.get('taskId')} {state}: {data.get('message')}"
        if line is not None:
            print(line, file=self.out, flush=True)

    async def decision(self, escalation: dict[str, Any]) -> dict[str, Any] | None:
        """What to decide on an open escalation (``None``: leave it waiting)."""
        kind = escalation.get("kind")
        if self.assume_yes and kind in ("approval_before", "approval_after", "permission"):
            return {"decision": "answer", "approved": True}
        if not self.ask:
            return None
        choice = (await _read("    decide: retry, skip, answer or stop? ")).strip().lower()
        if choice not in ("retry", "skip", "answer", "stop"):
            return await self.decision(escalation)
        fields: dict[str, Any] = {"decision": choice}
        if choice == "skip":
            fields["output"] = await _read("    the output its dependents get instead: ")
        elif choice == "answer":
            fields["answer"] = await _read("    your answer: ")
            fields["approved"] = True
        return fields


async def _read(prompt: str) -> str:
    print(prompt, end="", flush=True)
    return await asyncio.to_thread(sys.stdin.readline)


def definition_arg(path: str) -> CrewDefinition:
    """The crew file, or a CliError naming what is wrong in it."""
    try:
        return load_file(path)
    except CrewDefinitionError as exc:
        raise CliError(f"{path}: {exc}") from exc


async def crew_command(args: argparse.Namespace) -> int:
    """``neta-jupyter crew run``: the exit status."""
    definition = definition_arg(args.file)
    inputs = parse_inputs(args.input or [])
    side: CrewSide = ServerCrews(args) if args.server else EmbeddedCrews(args)
    printer = CrewPrinter(
        sys.stdout, definition, as_json=args.json, assume_yes=args.yes, ask=sys.stdin.isatty()
    )
    try:
        rid = await side.start(definition, inputs, "auto" if args.yes else "ask")
        print(f"crew {rid} started", file=sys.stderr, flush=True)
        return await _follow(side, printer, rid)
    finally:
        await side.aclose()


async def _follow(side: CrewSide, printer: CrewPrinter, rid: str) -> int:
    async for envelope in side.follow(rid, -1):
        printer.show(envelope)
        data = envelope.get("data") or {}
        if envelope.get("eventType") == ESCALATION and data.get("state") == "open":
            fields = await printer.decision(data)
            if fields is None:
                print(
                    f"the crew waits for a decision on {data.get('taskId')}: decide it through "
                    f"the crew API (crew/control, escalationId {data.get('escalationId')})",
                    file=sys.stderr,
                )
                return EXIT_WAITING
            await side.control(rid, "decide", escalation_id=data["escalationId"], **fields)
        if _ends(envelope):
            break
    if not printer.as_json:
        for task_id in printer.last:
            if task_id in printer.outputs:
                print(f"\n## {task_id}\n{printer.outputs[task_id]}", flush=True)
    return 0 if printer.status == "completed" else 1
