"""What a person is told about a mistake in what they asked, the same in every client.

``%neta`` in a notebook and ``neta-jupyter run`` in a terminal take the same options
(``--model``, ``--max-steps``, ``--attach``, ``--session``, …) and build the same run request, so a
mistake reads the same in both: an empty prompt is "the prompt is empty", not a validation error
of the request's ``content`` field, and a misspelt option is answered with the closest one.
The server's own answers (an unknown model, say) reach both as they are.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from pydantic import ValidationError

EMPTY_PROMPT = "the prompt is empty"
MAX_STEPS_NOT_A_NUMBER = "--max-steps needs a whole number"
MAX_STEPS_TOO_LOW = "--max-steps must be at least 1"

_OPTION_OF = {
    "model": "--model",
    "session_name": "--session",
    "max_steps": "--max-steps",
    "thinking_level": "--thinking",
    "approve": "--approve",
    "tools": "--tools",
    "attachments": "--attach",
}
"""The option that sets each run-request field, in both clients."""


def unknown_option(name: str, known: Iterable[str]) -> str:
    """``unknown option --modle: did you mean --model?`` (``name`` and ``known`` without --)."""
    options = sorted(set(known))
    close = difflib.get_close_matches(name, options, n=1, cutoff=0.6)
    if close:
        return f"unknown option --{name}: did you mean --{close[0]}?"
    return f"unknown option --{name} (known: {', '.join(f'--{o}' for o in options)})"


def describe_request(exc: ValidationError) -> str:
    """What is wrong with a run request the user wrote, one phrase per mistake."""
    said: list[str] = []
    for error in exc.errors():
        field = str(error["loc"][0]) if error["loc"] else ""
        if field == "content":
            phrase = EMPTY_PROMPT
        elif field == "max_steps":
            phrase = "--max-steps must be a whole number from 1 to 200"
        elif field in _OPTION_OF:
            phrase = f"{_OPTION_OF[field]}: {error['msg']}"
        else:
            where = ".".join(str(p) for p in error["loc"]) or "the request"
            phrase = f"{where}: {error['msg']}"
        if phrase not in said:
            said.append(phrase)
    return "; ".join(said)
