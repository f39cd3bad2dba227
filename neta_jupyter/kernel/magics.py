"""``%neta <prompt>`` and ``%%neta``: talk to the agent from a cell; never waits for the run.

How a line is read (options, prompt, ``{name}``) is in :mod:`.options`; the subcommands
(``%neta stop``, ``undo``, …) are here.
"""

from __future__ import annotations

import re
import time
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand
from pydantic import ValidationError

from ..client import RunRequest
from ..client import attachment_sources as attachments
from ..client.mistakes import EMPTY_PROMPT, describe_request
from ..tools.introspection import describe_variables
from .context import KernelContext, default_approve, notebook_file, notebook_path
from .host import HostError
from .options import (
    FIELD_OF,
    VALUED_OPTIONS,
    interpolate,
    parse_options,
    unquote,
)
from .tasks import spawn
from .undo import QueuedUndo, undo_now

HELP = """\
%neta <prompt>               ask the agent; the run shows live below the cell
%%neta [options]             the cell body is the prompt

Options (before the prompt or at its end; in %%neta on the first line):
  --model NAME               model to use (see %neta models)
  --session NAME             run in the named conversation
  --new                      start a fresh conversation (later prompts continue it)
  --max-steps N              at most N model calls
  --approve ask|auto|deny    tools that need permission: ask (default), allow or refuse all
                             (NETA_APPROVE=auto in the environment sets the default, for
                             notebooks run headless with jupyter execute or nbclient)
  --tools a,b,c              offer only these tools
  --thinking off|low|medium|high   how hard a reasoning model thinks (default: the endpoint's)
  --attach FILE|URL          show the model a file with the prompt (a path from the notebook's
                             folder, or an http(s) URL the server downloads); repeat it or
                             separate several with commas
  --                         end of options: the rest is the prompt

{name} in a prompt inserts str(name) from your namespace; {{name}} keeps the braces.

Subcommands:
  %neta stop [requestId]     stop the last run (or the given one)
  %neta suspend [requestId]  pause the last run after its current step (a running tool ends first)
  %neta resume [requestId]   continue a paused (or interrupted) run
  %neta status [requestId]   status of the last run (or the given one)
  %neta sessions             conversations and their token use
  %neta history [--session NAME]   runs of the current (or named) conversation
  %neta show <requestId>     show a run again, live if it is still going
  %neta config               where runs go and with what settings
  %neta models               models you can choose
  %neta mcp                  MCP servers, their state and their tools
  %neta compact [instructions]     summarise this conversation's older turns now
  %neta undo                 revert the last change the latest run made to this notebook
  %neta crew run FILE [--input NAME=VALUE]... [--approve auto]
                             run a crew of agents from a YAML or JSON file; its board shows
                             below the cell (the handle is neta_jupyter.last_crew())
  %neta help                 this text

From Python: run = neta_jupyter.ask("...", approve="auto"); await run.wait()
"""

_REQUEST_ID = re.compile(r"^r_\w+$")


@magics_class
class NetaMagics(Magics):
    """The ``%neta`` line and cell magic."""

    def __init__(self, shell: Any, context: KernelContext) -> None:
        super().__init__(shell)  # type: ignore[no-untyped-call]
        self.context = context

    @no_var_expand  # type: ignore[untyped-decorator]
    @line_cell_magic  # type: ignore[untyped-decorator]
    def neta(self, line: str, cell: str | None = None) -> None:
        """Ask the agent (see ``%neta help``)."""
        if cell is None:
            words = line.split()
            if not words:
                print(HELP)
                return
            if self._subcommand(words):
                return
            options, prompt = parse_options(line)
        else:
            options, leftover = parse_options(line, trailing=False)
            if leftover:
                raise UsageError(
                    f"the %%neta line holds options only; put {leftover!r} in the cell body"
                )
            prompt = cell
        prompt = interpolate(prompt, self.context.shell.user_ns).strip()
        if not prompt:
            raise UsageError(f"{EMPTY_PROMPT} (see %neta help)")
        self.start(prompt, options)

    def start(self, prompt: str, options: dict[str, Any]) -> None:
        """Start the run and show it; returns at once."""
        ctx = self.context
        if options.get("new"):
            ctx.new_session()
        fields = {
            FIELD_OF.get(name, name.replace("-", "_")): value
            for name, value in options.items()
            if name in VALUED_OPTIONS
        }
        try:
            fields["attachments"], files = attachments(options.get("attach", []))
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        fields.update(
            content=prompt,
            session_name=str(options.get("session") or ctx.session()),
            approve=options.get("approve") or default_approve(),
            notebook_path=notebook_file(ctx.shell.user_ns),
            kernel_variables=_variables_now(ctx.shell.user_ns),
        )
        try:
            run = RunRequest.model_validate(fields)
        except ValidationError as exc:
            raise UsageError(describe_request(exc)) from None
        ctx.launch(run, files=files)

    # --- subcommands

    def _subcommand(self, words: list[str]) -> bool:
        name, args = words[0], words[1:]
        ids = [a for a in args if _REQUEST_ID.match(a)]
        match name:
            case "help" | "config" | "models" | "sessions" if not args:
                getattr(self, f"_{name}")()
            case "mcp" if not args:
                self._guarded(lambda _: print(mcp_listing(self.context.host.mcp())), None)
            case "stop" | "status" | "suspend" | "resume" if len(args) == len(ids) <= 1:
                self._guarded(getattr(self, f"_{name}"), ids[0] if ids else None)
            case "show" if len(args) == len(ids) == 1:
                self._guarded(self._show, ids[0])
            case "compact":
                self._guarded(self._compact, " ".join(args) or None)
            case "undo" if not args:
                self._guarded(self._undo, None)
            case "crew":
                self._guarded(self._crew, args)
            case "history" if not args or (args[0].startswith("--session") and len(args) <= 2):
                self._guarded(self._history, _session_argument(args))
            case _:
                return False
        return True

    def _guarded(self, action: Any, argument: Any) -> None:
        try:
            action(argument)
        except HostError as exc:
            raise UsageError(exc.message) from None

    def _crew(self, args: list[str]) -> None:
        from .crew import crew_magic

        self.context.last_crew = crew_magic(self.context.host, args, default_approve())

    def _help(self) -> None:
        print(HELP)

    def _config(self) -> None:
        ctx = self.context
        lines = [f"{key}: {value}" for key, value in ctx.host.describe().items()]
        lines.append(f"session: {ctx.session()}")
        try:
            lines.append(f"default model: {ctx.host.models().get('default')}")
        except HostError as exc:
            lines.append(f"default model: unknown ({exc.message})")
        print("\n".join(lines))

    def _models(self) -> None:
        answer = self.context.host.models()
        default = answer.get("default")
        for name in answer.get("models", []):
            print(f"{name}{'  (default)' if name == default else ''}")
        if default not in answer.get("models", []):
            print(f"{default}  (default)")

    def _sessions(self) -> None:
        sessions = self.context.host.sessions()
        if not sessions:
            print("no conversations yet")
            return
        current = self.context.session()
        for s in sessions:
            mark = "*" if s.get("name") == current else " "
            tokens = int(s.get("inputTokens") or 0) + int(s.get("outputTokens") or 0)
            print(f"{mark} {s.get('name')}  ({s.get('sessionId')}, {tokens:,} tokens)")

    def _undo(self, _: None) -> None:
        ctx = self.context
        path = notebook_path(ctx.shell.user_ns)
        if path is None:
            print("nothing to undo: this kernel does not know its notebook")
            return
        undo = QueuedUndo(ctx.host, path)
        ctx.enqueue(ctx.session(), undo)
        if undo.after is not None:
            undo.begin()  # after the prompts above it ("Run All"): it waits for them
            return
        try:
            print(undo_now(ctx.host, path))
        finally:
            undo.done()

    def _stop(self, request_id: str | None) -> None:
        last = self.context.last
        if request_id is None and last is not None and last.queued:
            last.drop()
            print(f"{last.prompt!r} will not run: it was still queued")
            return
        if (request_id := request_id or self._last_id("stop")) is None:
            return
        handle = self.context.handle_for(request_id)

        async def stop() -> None:
            try:
                await self.context.host.terminate(request_id)
            except HostError as exc:
                print(_could_not("stop", request_id, exc))
            if handle is not None:
                handle.poke()

        spawn(stop(), "neta-stop")
        print(f"stopping {request_id}")

    def _suspend(self, request_id: str | None) -> None:
        if request_id := request_id or self._last_id("pause"):
            self._act_later(request_id, "suspend", "pausing")

    def _resume(self, request_id: str | None) -> None:
        if request_id := request_id or self._last_id("resume"):
            self._act_later(request_id, "resume", "resuming")

    def _act_later(self, request_id: str, action: str, doing: str) -> None:
        """Ask the host for ``action`` on the run, on the kernel's loop (the cell returns now)."""
        handle = self.context.handle_for(request_id)

        async def act() -> None:
            try:
                if handle is not None:  # it also follows what the action brings
                    await getattr(handle, action)()
                else:
                    await getattr(self.context.host, action)(request_id)
            except HostError as exc:
                print(_could_not(action, request_id, exc))

        spawn(act(), f"neta-{action}")
        print(f"{doing} {request_id}")

    def _compact(self, instructions: str | None) -> None:
        ctx = self.context

        async def compact() -> None:
            try:
                started = await ctx.host.compact(ctx.session(), instructions)
            except HostError as exc:
                print(_could_not("compact", ctx.session(), exc))
                return
            ctx.attach(started.request_id, "/compact")

        spawn(compact(), "neta-compact")
        print(f"compacting {ctx.session()!r}")

    def _status(self, request_id: str | None) -> None:
        last = self.context.last
        if request_id is None and last is not None and last.request_id is None:
            # Queued, or embedded: created on the kernel's loop right after the cell that asked.
            print(f"{last.prompt!r}: {last.status}" + (f"\n{last.waiting}" if last.waiting else ""))
            return
        if request_id := request_id or self._last_id("show"):
            print(_describe_run(self.context.host.status(request_id)))

    def _show(self, request_id: str) -> None:
        summary = self.context.host.status(request_id)
        self.context.attach(request_id, str(summary.get("prompt") or ""))

    def _history(self, session: str | None) -> None:
        name = session or self.context.session()
        runs = self.context.host.runs(name)
        if not runs:
            print(f"no runs in {name!r} yet")
            return
        print(f"conversation {name!r}, newest first:")
        for run in runs:
            print(_describe_run(run, brief=True))

    def _last_id(self, verb: str) -> str | None:
        """The latest run's id; None, after saying so, when this kernel started none yet."""
        last = self.context.last
        if last is None or last.request_id is None:
            print(
                f"nothing to {verb}: no run was started from this kernel yet (or give a requestId)"
            )
            return None
        return last.request_id


def _could_not(action: str, request_id: str, exc: HostError) -> str:
    """An action that failed, for the user.

    One with nothing to act on (a run that has ended, a conversation not begun) is a note.
    """
    if exc.code in ("RUN_NOT_ACTIVE", "RUN_NOT_SUSPENDED", "SESSION_NOT_FOUND"):
        return f"nothing to {action}: {exc.message}"
    return f"could not {action} {request_id}: {exc.message}"


def mcp_listing(answer: dict[str, Any]) -> str:
    """``%neta mcp``: each server with its state (and error), then its tools."""
    lines = [f"problem: {p}" for p in answer.get("problems", [])]
    for server in answer.get("servers", []):
        head = (
            f"{server['name']} ({server.get('transport') or 'not configured'}): {server['state']}"
        )
        if server["state"] == "idle":
            head += " (starts when a run first may use it)"
        lines.append(f"{head} — {server['error']}" if server.get("error") else head)
        for t in server.get("tools", []):
            mark = "read-only" if t.get("readOnly") else "asks first"
            # A name cut to fit a model: the server's own name beside it.
            own = f"  ({t['tool']})" if t.get("tool") and t["tool"] not in t["name"] else ""
            lines.append(f"  {t['name']}{own}  [{mark}]  {t.get('description') or ''}".rstrip())
    return "\n".join(lines) or "no MCP servers configured (mcp.json or c.NetaApp.mcp_servers)"


def _variables_now(namespace: dict[str, Any]) -> list[str] | None:
    """The variables the prompt refers to, taken while its cell runs.

    A cell run after it (Run All) may keep the kernel busy while the agent works.
    """
    try:
        return describe_variables(namespace)
    except Exception:  # an odd namespace must not stop the prompt; the agent can still ask
        return None


def _session_argument(args: list[str]) -> str | None:
    """``[]``, ``["--session", NAME]`` or ``["--session=NAME"]`` → NAME or None."""
    if len(args) == 2:
        return unquote(args[1])
    if args:
        return unquote(args[0].partition("=")[2]) or None
    return None


def _describe_run(summary: dict[str, Any], *, brief: bool = False) -> str:
    usage = summary.get("usage") or {}
    tokens = int(usage.get("totalTokens") or 0)
    created = summary.get("created")
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(created)) if created else ""
    prompt = " ".join(str(summary.get("prompt") or "").split())
    prompt = prompt if len(prompt) <= 70 else prompt[:69] + "…"
    head = (
        f"{summary.get('requestId')}  {summary.get('status')}  {summary.get('model')}  "
        f"step {summary.get('step', 0)}  {tokens:,} tokens  {when}"
    )
    if parent := summary.get("parentRequestId"):
        prompt = f"(sub-agent of {parent}) {prompt}"
    if brief:
        return f"{head}\n    {prompt}"
    lines = [head, f"prompt: {prompt}"]
    if ask := summary.get("pendingAsk"):
        lines.append(f"waiting for: {ask.get('toolName') or ask.get('kind')} ({ask.get('askId')})")
    if deadline := summary.get("suspendDeadline"):
        until = time.strftime("%Y-%m-%d %H:%M", time.localtime(deadline))
        lines.append(f"waits for you until {until}, then stops (USER_NO_RESPONSE)")
    if summary.get("recoverable"):
        lines.append("the failure can be retried")
    return "\n".join(lines)
