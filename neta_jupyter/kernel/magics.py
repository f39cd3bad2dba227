"""``%neta <prompt>`` and ``%%neta``: talk to the agent from a cell; never waits for the run.

Options go before the prompt or at its end (``%neta --model demo what is in df?``,
``%neta what is in df? --approve auto``); in ``%%neta`` the first line holds the options and the
cell body is the prompt. ``{name}`` in a prompt is replaced with ``str(name)`` from the user's
namespace (``{{name}}`` keeps the braces; unknown names are left as they are).
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
from ..client.mistakes import (
    EMPTY_PROMPT,
    MAX_STEPS_NOT_A_NUMBER,
    MAX_STEPS_TOO_LOW,
    describe_request,
    unknown_option,
)
from ..providers.base import THINKING_LEVELS
from ..tools.introspection import describe_variables
from .context import KernelContext, default_approve, notebook_file, notebook_path
from .host import HostError
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

_VALUED = ("model", "session", "max-steps", "approve", "tools", "thinking", "attach")
_FLAGS = ("new",)
_FIELD_OF = {"session": "session_name", "thinking": "thinking_level", "attach": "attachments"}
"""Options named unlike their run-request field; the others map by name (``--max-steps`` →
``max_steps``), so a run option needs only its entry in ``_VALUED`` (and a line of HELP)."""
_LEADING = re.compile(r"\s*--(?P<name>[A-Za-z][\w-]*)?(?=\s|=|$)")
_VALUE = re.compile(r"(?:=|\s+)(?P<value>\"[^\"]*\"|'[^']*'|[^\s\"']+)")
_TRAILING = re.compile(
    rf"(?:^|\s)--(?P<name>{'|'.join(_VALUED)})(?:=|\s+)(?P<value>\"[^\"]*\"|'[^']*'|[^\s\"']+)\s*$"
    rf"|(?:^|\s)--(?P<flag>{'|'.join(_FLAGS)})\s*$"
)
_REQUEST_ID = re.compile(r"^r_\w+$")
_VARIABLE = re.compile(r"\{\{(?P<kept>[A-Za-z_][\w.]*)\}\}|\{(?P<name>[A-Za-z_][\w.]*)\}")
_MAX_INTERPOLATED = 4000
_LINE_MAGIC = re.compile(r"^(?P<indent>[ \t]*)%neta(?P<rest>(?:[ \t].*)?)$")


def protect_question_marks(lines: list[str]) -> list[str]:
    """Turn ``%neta …`` lines into explicit calls before IPython reads a final ``?`` as help.

    Without this, ``%neta what is in df?`` would become ``df?`` (object help) and no run
    would start. An input transformer of the "cleanup" stage, which runs first.
    """
    out = []
    for line in lines:
        match = _LINE_MAGIC.match(line.rstrip("\n"))
        if match is None:
            out.append(line)
            continue
        rest = match["rest"].strip()
        ending = "\n" if line.endswith("\n") else ""
        out.append(f"{match['indent']}get_ipython().run_line_magic('neta', {rest!r}){ending}")
    return out


def parse_options(text: str, *, trailing: bool = True) -> tuple[dict[str, Any], str]:
    """Options at the start (and, unless told otherwise, at the end) of ``text``; the rest."""
    options: dict[str, Any] = {}
    pos, ended = 0, False
    while match := _LEADING.match(text, pos):
        name = match["name"]
        if name is None:  # a bare "--": the prompt follows
            pos, ended = match.end(), True
            break
        pos = _take(text, match.end(), name, options)
    rest, attached_at_end = text[pos:], list[str]()
    while trailing and not ended and (match := _TRAILING.search(rest)):
        if match["flag"]:
            options.setdefault(match["flag"], True)
        elif match["name"] == "attach":  # may be repeated: every one counts, in order
            attached_at_end.insert(0, _unquote(match["value"]))
        else:
            options.setdefault(match["name"], _unquote(match["value"]))
        rest = rest[: match.start()]
    if attached_at_end:
        options["attach"] = ",".join([*filter(None, [options.get("attach")]), *attached_at_end])
    return _validated(options), rest.strip()


def _take(text: str, pos: int, name: str, options: dict[str, Any]) -> int:
    if name in _FLAGS:
        options[name] = True
        return pos
    if name not in _VALUED:
        raise UsageError(f"{unknown_option(name, (*_VALUED, *_FLAGS))} (see %neta help)")
    value = _VALUE.match(text, pos)
    if value is None:
        raise UsageError(f"--{name} needs a value")
    given = _unquote(value["value"])
    # --attach may be repeated; every other option takes one value.
    options[name] = f"{options[name]},{given}" if name == "attach" and name in options else given
    return value.end()


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _validated(options: dict[str, Any]) -> dict[str, Any]:
    if "approve" in options and options["approve"] not in ("ask", "auto", "deny"):
        raise UsageError("--approve must be ask, auto or deny")
    if "max-steps" in options:
        try:
            options["max-steps"] = int(options["max-steps"])
        except ValueError:
            raise UsageError(MAX_STEPS_NOT_A_NUMBER) from None
        if options["max-steps"] < 1:
            raise UsageError(MAX_STEPS_TOO_LOW)
    if "thinking" in options and options["thinking"] not in THINKING_LEVELS:
        raise UsageError(f"--thinking must be one of {', '.join(THINKING_LEVELS)}")
    for listed in ("tools", "attach"):
        if listed in options:
            options[listed] = [t.strip() for t in str(options[listed]).split(",") if t.strip()]
    return options


def interpolate(text: str, namespace: dict[str, Any]) -> str:
    """``{name}`` / ``{name.attr}`` → ``str`` of the value; unknown names stay as written."""

    def substitute(match: re.Match[str]) -> str:
        if match["kept"] is not None:
            return "{" + match["kept"] + "}"
        head, *attributes = match["name"].split(".")
        if head not in namespace:
            return match[0]
        value = namespace[head]
        for attribute in attributes:
            try:
                value = getattr(value, attribute)
            except Exception:
                return match[0]
        try:
            shown = str(value)
        except Exception:
            return match[0]
        if len(shown) > _MAX_INTERPOLATED:
            shown = shown[:_MAX_INTERPOLATED] + "…"
        return shown

    return _VARIABLE.sub(substitute, text)


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
            _FIELD_OF.get(name, name.replace("-", "_")): value
            for name, value in options.items()
            if name in _VALUED
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
        return _unquote(args[1])
    if args:
        return _unquote(args[0].partition("=")[2]) or None
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
