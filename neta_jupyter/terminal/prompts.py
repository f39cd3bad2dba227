"""Answering what a run asks, at the terminal: permission asks and the agent's questions.

A question is only ever put to a person: when stdin is not a terminal, a permission ask is
denied (piped input is data, and approving from it could run tools unseen) and a question is
answered only by ``--answer``; otherwise the run is left waiting, and the command says how to go on.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TextIO

from ..events import ClarifyData, PermissionAskData
from .text import asked_label, clean, compact_arguments, one_line


@dataclass(frozen=True, slots=True)
class Decision:
    """The answer to one permission ask."""

    approved: bool
    always: bool = False


@dataclass(frozen=True, slots=True)
class Answer:
    """The reply to one of the agent's questions."""

    text: str


Reply = Decision | Answer


class PromptSurface(Protocol):
    """Where questions are shown: the renderer of the run."""

    def notice(self, text: str) -> None:
        """A message from the command itself."""
        ...

    def prompt(self, text: str) -> None:
        """A question; the answer is typed after it on the same line."""
        ...

    def answered(self) -> None:
        """The user pressed Enter."""
        ...


async def read_line(stream: TextIO) -> str | None:
    """One line from ``stream`` without blocking the event loop; None at end of input.

    A daemon thread rather than the default executor: a Ctrl-C while the user is deciding
    must not leave ``asyncio.run`` waiting at exit for a read that never returns.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str] = loop.create_future()

    def deliver(line: str) -> None:
        if not future.done():
            future.set_result(line)

    def worker() -> None:
        try:
            line = stream.readline()
        except (OSError, ValueError):
            line = ""
        with contextlib.suppress(RuntimeError):  # the loop closed while we were reading
            loop.call_soon_threadsafe(deliver, line)

    threading.Thread(target=worker, name="neta-stdin", daemon=True).start()
    line = await future
    return line if line else None


class TerminalAsker:
    """Asks the person at the terminal; ``--yes`` and ``--answer`` decide without asking."""

    def __init__(
        self,
        surface: PromptSurface,
        stdin: TextIO,
        *,
        assume_yes: bool,
        answers: Sequence[str] = (),
    ) -> None:
        self.surface = surface
        self.stdin = stdin
        self.assume_yes = assume_yes
        self._answers = list(answers)

    def _interactive(self) -> bool:
        isatty = getattr(self.stdin, "isatty", None)
        return bool(isatty and isatty())

    async def permission(self, ask: PermissionAskData) -> Decision:
        """Approve once, always, or deny; deny when nobody can be asked."""
        if self.assume_yes:
            return Decision(approved=True)
        if not self._interactive():
            self.surface.notice(
                f"stdin is not a terminal, so {asked_label(ask).ask_words()} is denied "
                "(pass --yes to approve tool calls without asking)"
            )
            return Decision(approved=False)
        question = f"Allow {asked_label(ask).ask_words()} {compact_arguments(ask.arguments)}? "
        while True:
            line = await self._ask(question + "[y]es / [a]lways / [n]o: ")
            if line is None:
                self.surface.notice("no answer (end of input): denied")
                return Decision(approved=False)
            answer = line.strip().lower()
            if answer in ("y", "yes"):
                return Decision(approved=True)
            if answer in ("a", "always"):
                return Decision(approved=True, always=True)
            if answer in ("n", "no"):
                return Decision(approved=False)

    async def clarify(self, question: ClarifyData, elsewhere: str | None = None) -> Answer | None:
        """The reply to the agent's question; None when nobody can give one.

        ``elsewhere`` says where else the waiting run can be answered (shown when nobody can
        answer here).
        """
        if self._answers:
            return Answer(self._answers.pop(0))
        if not self._interactive():
            also = f", or {elsewhere}" if elsewhere else ""
            self.surface.notice(
                f"the agent asks: {one_line(question.question)}\n"
                "stdin is not a terminal, so the question cannot be asked here: run the command "
                f"again with --answer TEXT{also}"
            )
            return None
        options = [one_line(o) for o in question.options]
        hint = "".join(f"\n  {n}. {o}" for n, o in enumerate(options, 1))
        if options:
            hint += "\n(a number picks an option; anything else is sent as written)"
        while True:
            line = await self._ask(f"{clean(question.question).strip()}{hint}\nanswer: ")
            if line is None:
                self.surface.notice("no answer (end of input): the question stays open")
                return None
            reply = line.strip()
            if reply.isdigit() and 1 <= int(reply) <= len(options):
                return Answer(question.options[int(reply) - 1])
            if reply:
                return Answer(reply)

    async def _ask(self, text: str) -> str | None:
        self.surface.prompt(text)
        line = await read_line(self.stdin)
        if line is not None:
            self.surface.answered()
        return line
