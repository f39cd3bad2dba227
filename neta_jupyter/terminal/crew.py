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
from typing import Any, TextIO

from ..client._errors import ClientError
from ..client.crews import CrewSide, HttpCrews, InProcessCrews, ends
from ..crews import CrewDefinition, CrewDefinitionError, load_file
from ..crews.log import ESCALATION, LOG, RUN_STATUS, TASK_STATUS
from ..crews.manager import Crews
from ..runtime import RunApiError
from .backends import CliError, EmbeddedBackend, _user_name

Envelope = dict[str, Any]
EXIT_WAITING = 3


class EmbeddedCrews(InProcessCrews):
    """The crew in this process, on the embedded runtime of ``neta-jupyter run``."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.backend = EmbeddedBackend(args)
        super().__init__(Crews(self.backend.runtime), _user_name())

    async def start(self, definition: CrewDefinition, inputs: dict[str, str], approve: str) -> str:
        """Start it here (a refusal is the command's error)."""
        try:
            return await super().start(definition, inputs, approve)
        except RunApiError as exc:
            raise CliError(exc.message) from exc

    async def aclose(self) -> None:
        """Pause the crew, then stop the runtime."""
        await self.crews.shutdown()
        await self.backend.aclose()


class ServerCrews(HttpCrews):
    """The crew on the Jupyter server of ``--server``."""

    def __init__(self, args: argparse.Namespace) -> None:
        token = args.token if args.token is not None else os.environ.get("JUPYTER_TOKEN", "")
        super().__init__(args.server, {"Authorization": f"token {token}"} if token else {})

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            return await super()._post(path, body)
        except ClientError as exc:
            raise CliError(f"{exc.message} ({exc.code})") from exc


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
        if ends(envelope):
            break
    if not printer.as_json:
        for task_id in printer.last:
            if task_id in printer.outputs:
                print(f"\n## {task_id}\n{printer.outputs[task_id]}", flush=True)
    return 0 if printer.status == "completed" else 1
