"""The words of a ``%neta`` line: its options, the prompt, and ``{name}`` in the prompt.

Options go before the prompt or at its end (``%neta --model demo what is in df?``,
``%neta what is in df? --approve auto``); in ``%%neta`` the first line holds the options and the
cell body is the prompt. ``{name}`` in a prompt is replaced with ``str(name)`` from the user's
namespace (``{{name}}`` keeps the braces; unknown names are left as they are).
"""

from __future__ import annotations

import re
from typing import Any

from IPython.core.error import UsageError

from ..client.mistakes import MAX_STEPS_NOT_A_NUMBER, MAX_STEPS_TOO_LOW, unknown_option
from ..providers.base import THINKING_LEVELS
from ..runtime.requests import APPROVE_MODES

VALUED_OPTIONS = ("model", "session", "max-steps", "approve", "tools", "thinking", "attach")
FLAG_OPTIONS = ("new",)
FIELD_OF = {"session": "session_name", "thinking": "thinking_level", "attach": "attachments"}
"""Options named unlike their run-request field; the others map by name (``--max-steps`` →
``max_steps``), so a run option needs only its entry in ``VALUED_OPTIONS`` (and a line of HELP)."""
_LEADING = re.compile(r"\s*--(?P<name>[A-Za-z][\w-]*)?(?=\s|=|$)")
_VALUE = re.compile(r"(?:=|\s+)(?P<value>\"[^\"]*\"|'[^']*'|[^\s\"']+)")
_TRAILING = re.compile(
    rf"(?:^|\s)--(?P<name>{'|'.join(VALUED_OPTIONS)})(?:=|\s+)(?P<value>\"[^\"]*\"|'[^']*'|[^\s\"']+)\s*$"
    rf"|(?:^|\s)--(?P<flag>{'|'.join(FLAG_OPTIONS)})\s*$"
)
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
            attached_at_end.insert(0, unquote(match["value"]))
        else:
            options.setdefault(match["name"], unquote(match["value"]))
        rest = rest[: match.start()]
    if attached_at_end:
        options["attach"] = ",".join([*filter(None, [options.get("attach")]), *attached_at_end])
    return _validated(options), rest.strip()


def _take(text: str, pos: int, name: str, options: dict[str, Any]) -> int:
    if name in FLAG_OPTIONS:
        options[name] = True
        return pos
    if name not in VALUED_OPTIONS:
        raise UsageError(
            f"{unknown_option(name, (*VALUED_OPTIONS, *FLAG_OPTIONS))} (see %neta help)"
        )
    value = _VALUE.match(text, pos)
    if value is None:
        raise UsageError(f"--{name} needs a value")
    given = unquote(value["value"])
    # --attach may be repeated; every other option takes one value.
    options[name] = f"{options[name]},{given}" if name == "attach" and name in options else given
    return value.end()


def unquote(value: str) -> str:
    """``value`` without the quotes around it, if it has them."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _validated(options: dict[str, Any]) -> dict[str, Any]:
    if "approve" in options and options["approve"] not in APPROVE_MODES:
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
