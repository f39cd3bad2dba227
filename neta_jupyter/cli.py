"""``neta-jupyter``: run a prompt from the terminal and watch the run live.

The run lives either in an embedded runtime (this process, a SQLite store, a local kernel) or on
a Jupyter server (REST + SSE); the parts are in :mod:`neta_jupyter.terminal`. On a terminal the
run is drawn live with rich; otherwise (and with ``--plain``) as plain lines, or as JSON lines.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from ._version import __version__
from .cli_render import JsonRenderer, TerminalRenderer, color_enabled
from .client import HttpTransport, RunClient
from .client.mistakes import MAX_STEPS_TOO_LOW, unknown_option
from .terminal import doctor, mcp_config
from .terminal.backends import Backend, CliError, EmbeddedBackend, ServerBackend, default_data_dir
from .terminal.crew import crew_command
from .terminal.follow import EXIT_ERROR, EXIT_INTERRUPTED, Renderer, RunFollower
from .terminal.live import LiveRenderer
from .terminal.mcp_asks import answer_asks
from .terminal.prompts import TerminalAsker

_EPILOG = """\
exit status: 0 completed, 1 failed, 2 could not start or follow the run,
3 suspended for a reason the terminal cannot answer, 130 interrupted (Ctrl-C cancels the run).

examples:
  neta-jupyter run "what files are here?"
  neta-jupyter run "what is 17*23?" --yes
  neta-jupyter run "summarise notes.txt" --ask read_file
  neta-jupyter run "hello" --model local:qwen2.5 --config my_config.py
  neta-jupyter run "plot sales.csv" --server http://localhost:8888/ --yes
  neta-jupyter run "hello" --json | jq -r .eventType
"""


def _on_interrupt(loop: asyncio.AbstractEventLoop, interrupted: asyncio.Event) -> None:
    """First Ctrl-C cancels the run politely; a second one leaves at once."""

    def handle() -> None:
        if interrupted.is_set():
            os._exit(EXIT_INTERRUPTED)
        interrupted.set()

    try:
        loop.add_signal_handler(signal.SIGINT, handle)
    except (NotImplementedError, RuntimeError):  # Windows has no loop signal handlers
        signal.signal(signal.SIGINT, lambda *_: loop.call_soon_threadsafe(handle))


def make_renderer(args: argparse.Namespace, backend: Backend) -> Renderer:
    """JSON lines with ``--json``; plain lines off a terminal or with ``--plain``; else live."""
    if args.json:
        return JsonRenderer(sys.stdout, sys.stderr)
    if args.plain or not sys.stdout.isatty():
        return TerminalRenderer(
            sys.stdout, color=color_enabled(sys.stdout), locate_attachment=backend.locate
        )
    return LiveRenderer(sys.stdout, locate_attachment=backend.locate)


async def run_command(args: argparse.Namespace) -> int:
    """``neta-jupyter run``: the exit status."""
    interrupted = asyncio.Event()
    _on_interrupt(asyncio.get_running_loop(), interrupted)
    backend: Backend = ServerBackend(args) if args.server else EmbeddedBackend(args)
    renderer = make_renderer(args, backend)
    try:
        asker = TerminalAsker(renderer, sys.stdin, assume_yes=args.yes, answers=args.answer or [])
        follower = RunFollower(backend, renderer, asker)
        task = asyncio.create_task(follower.run())
        stop = asyncio.create_task(interrupted.wait())
        try:
            await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if task.done():
            return task.result()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return await follower.cancel()
    finally:
        renderer.close()
        await backend.aclose()


async def mcp_asks_command(args: argparse.Namespace) -> int:
    """``neta-jupyter mcp asks``: the exit status."""
    token = args.token if args.token is not None else os.environ.get("JUPYTER_TOKEN", "")
    headers = {"Authorization": f"token {token}"} if token else {}
    transport = HttpTransport(
        mcp_config.server_url(args.server), headers=headers, timeout=httpx.Timeout(30.0, read=60.0)
    )
    client = RunClient(transport)
    renderer = TerminalRenderer(sys.stdout, color=color_enabled(sys.stdout))
    asker = TerminalAsker(renderer, sys.stdin, assume_yes=args.yes)
    try:
        return await answer_asks(client, asker, renderer, once=args.once)
    finally:
        renderer.close()
        await client.aclose()


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    parser = argparse.ArgumentParser(
        prog="neta-jupyter",
        description="neta_jupyter: an AI agent for Jupyter, from the terminal.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = commands.add_parser(
        "run",
        help="run a prompt and show the agent's work live",
        description="Run a prompt and show the run as it happens: reasoning (dimmed), the\n"
        "answer as markdown, one card per tool call, progress and notices. Tool calls that\n"
        "need approval, and the agent's questions, are asked about on the terminal.\n"
        "Without --server the run is embedded here, with the settings of the Jupyter\n"
        "config files (c.NetaApp.model, endpoints, permission_rules, ...), and its Python\n"
        "runs in a local kernel started when first needed.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_run_options(run)
    _add_crew_command(commands)
    doctor.add_command(commands)
    mcp_config.add_command(commands)
    return parser


def _add_crew_command(commands: Any) -> None:
    """``crew run FILE``: a crew of agents, followed and steered on the terminal."""
    crew = commands.add_parser("crew", help="run a crew: several agents working through tasks")
    actions = crew.add_subparsers(dest="crew_command", required=True, metavar="ACTION")
    run = actions.add_parser(
        "run",
        help="run the crew a YAML or JSON file defines and follow it",
        description="Run a crew: its tasks run as agent runs in the order their depends_on\n"
        "gives, a few at a time, each task's output passed to the tasks that use it. Every\n"
        "status change and log line is printed; a decision the crew waits for (a task that\n"
        "failed, an agent's question, an approval) is asked at the terminal.",
        epilog="exit status: 0 completed, 1 stopped or failed, 2 could not start, 3 waits for a\n"
        "decision and there is no terminal to ask.\n\nexample:\n"
        "  neta-jupyter crew run crew.yaml --input table=sales.csv --yes",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("file", help="the crew definition (.yaml, .yml or .json)")
    run.add_argument(
        "--input",
        action="append",
        metavar="NAME=VALUE",
        help="a value of one of the crew's inputs (repeatable)",
    )
    run.add_argument(
        "--yes",
        "-y",
        action="store_true",
        help="approve tool calls and approval gates without asking",
    )
    run.add_argument("--json", action="store_true", help="print each crew event as a JSON line")
    run.set_defaults(
        prompt="(crew)", session=None, model=None, max_steps=None, attach=None, answer=None
    )
    _add_where_options(run)


def _add_run_options(run: argparse.ArgumentParser) -> None:
    """Options of ``run``, grouped by where the run lives."""
    run.add_argument("prompt", help="what to ask the agent")
    run.add_argument(
        "--model",
        help="model as provider:model (default: the configured one, "
        "'demo' offline; 'scripted:FILE.json' plays a script)",
    )
    run.add_argument(
        "--yes", "-y", action="store_true", help="approve every tool call without asking"
    )
    run.add_argument("--max-steps", type=int, metavar="N", help="model calls the run may make")
    run.add_argument(
        "--attach",
        action="append",
        metavar="FILE|URL",
        help="show the model a file with the prompt: a path (uploaded) or an http(s) URL (the "
        "server downloads it); repeatable",
    )
    run.add_argument(
        "--session", metavar="NAME", help="continue the named session (default: a new session)"
    )
    run.add_argument(
        "--answer",
        action="append",
        metavar="TEXT",
        help="the reply to the agent's question, if it asks one (repeatable: one per question, "
        "in order); without it a question is asked at the terminal",
    )
    shown = run.add_mutually_exclusive_group()
    shown.add_argument(
        "--plain",
        action="store_true",
        help="plain lines instead of the live display (the default when stdout is not a terminal)",
    )
    shown.add_argument(
        "--json", action="store_true", help="print each event envelope as one JSON line instead"
    )
    _add_where_options(run)


def _add_where_options(run: argparse.ArgumentParser) -> None:
    """Options of the two places a run can live."""
    _add_embedded_options(run.add_argument_group("embedded runtime (without --server)"))
    remote = run.add_argument_group("on a Jupyter server")
    remote.add_argument(
        "--server",
        metavar="URL",
        help="follow the run on this Jupyter server, e.g. http://localhost:8888/",
    )
    remote.add_argument("--token", metavar="T", help="the server's token (default: $JUPYTER_TOKEN)")


def _add_embedded_options(local: argparse._ArgumentGroup) -> None:
    """Options of a run embedded in the command."""
    local.add_argument(
        "--root", metavar="DIR", help="folder the agent may read, the kernel's too (default: .)"
    )
    local.add_argument(
        "--config",
        metavar="FILE",
        help="a Jupyter config file (.py or .json, c.NetaApp.…) read after the usual ones",
    )
    local.add_argument(
        "--data-dir", metavar="DIR", help=f"where runs are stored (default: {default_data_dir()})"
    )
    local.add_argument(
        "--pace",
        type=float,
        metavar="SECONDS",
        help="seconds between the demo model's tokens (0: as fast as possible)",
    )
    local.add_argument(
        "--ask",
        action="append",
        metavar="TOOL",
        help="ask before every call of TOOL (repeatable), e.g. --ask read_file",
    )


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Reject option combinations that would be silently ignored."""
    if args.server:
        local = [
            f"--{name.replace('_', '-')}"
            for name in ("root", "config", "data_dir", "pace", "ask")
            if getattr(args, name) is not None
        ]
        if local:
            parser.error(f"{', '.join(local)} only apply to the embedded runtime, not --server")
    elif args.token is not None:
        parser.error("--token needs --server")
    if args.root is not None and not Path(args.root).expanduser().is_dir():
        parser.error(f"--root {args.root!r} is not a folder")
    if args.max_steps is not None and args.max_steps < 1:
        parser.error(MAX_STEPS_TOO_LOW)
    if args.pace is not None and args.pace < 0:
        parser.error("--pace must not be negative")


def _unknown_arguments(parser: argparse.ArgumentParser, command: str, unknown: list[str]) -> str:
    """An unknown option with the closest known one (as ``%neta`` says it), else argparse's."""
    options = [arg for arg in unknown if arg.startswith("--")]
    if not options:
        return f"unrecognized arguments: {' '.join(unknown)}"
    chosen = parser
    for action in parser._actions:  # the command's own parser holds its options
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            chosen = action.choices[command]
    known = [
        name[2:] for action in chosen._actions for name in action.option_strings if name[:2] == "--"
    ]
    return unknown_option(options[0][2:].partition("=")[0], known)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``neta-jupyter`` console script."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        parser.error(_unknown_arguments(parser, args.command, unknown))
    if args.command == "doctor":
        return doctor.command(args)
    if args.command == "mcp" and args.mcp_command == "config":
        return mcp_config.command(args)
    if args.command != "mcp":
        _check(parser, args)
    # Cards use a few symbols (▸ ✓ ✗); a terminal that cannot show them gets '?' instead.
    with contextlib.suppress(AttributeError, ValueError):
        sys.stdout.reconfigure(errors="replace")  # type: ignore[union-attr]
    try:
        match args.command:
            case "run":
                return asyncio.run(run_command(args))
            case "crew":
                return asyncio.run(crew_command(args))
            case "mcp":
                return asyncio.run(mcp_asks_command(args))
        parser.error(f"unknown command {args.command!r}")
    except CliError as exc:
        print(f"neta-jupyter: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, and keep Python's exit-time flush
        # of stdout from raising again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
