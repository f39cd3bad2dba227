"""The same mistake reads the same in a notebook (``%neta``) and in a terminal (``neta-jupyter run``).

Both clients share the words (:mod:`neta_jupyter.client.mistakes`); what the server refuses (an
unknown model) reaches both as the server said it. A misspelt option is answered with the closest
one, an unknown model with the configured ones, the ``endpoint:model`` form and the likely name.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from neta_jupyter.client import RunRequest
from neta_jupyter.client.mistakes import EMPTY_PROMPT, describe_request, unknown_option
from neta_jupyter.providers import ModelRegistry
from tests.cli_helpers import cli, embedded, workdir
from tests.kernel.test_embedded import kernel

__all__ = ["workdir"]  # a fixture, imported for the tests below

pytestmark = pytest.mark.timeout(120)

IN_A_NOTEBOOK = """
import json
from IPython.core.error import UsageError
said = []
for line in {lines!r}:
    try:
        get_ipython().run_line_magic("neta", line)
    except UsageError as exc:
        said.append(str(exc))
from neta_jupyter.kernel import current_context as _cc
run = _cc().last
await run.wait(30)
said.append(run.error)
print(json.dumps(said))
"""


def test_unknown_options_are_answered_with_the_closest() -> None:
    known = ["model", "session", "max-steps", "new"]
    assert unknown_option("modle", known) == "unknown option --modle: did you mean --model?"
    assert unknown_option("max-step", known).endswith("did you mean --max-steps?")
    far = unknown_option("colour", known)
    assert far.startswith("unknown option --colour (known: --max-steps, --model, --new")


def test_an_empty_prompt_is_said_so_not_as_a_field_error() -> None:
    with pytest.raises(ValidationError) as caught:
        RunRequest.model_validate({"content": "", "max_steps": 0})
    said = describe_request(caught.value)
    assert said == f"{EMPTY_PROMPT}; --max-steps must be a whole number from 1 to 200"
    assert "content" not in said


@pytest.mark.parametrize(
    ("spec", "meant"),
    [
        ("gpt-5", "openai:gpt-5"),
        ("claude-sonnet-4", "anthropic:claude-sonnet-4"),
        ("opnai:gpt-5", "openai:gpt-5"),
        ("dmeo", "demo"),
    ],
)
def test_an_unknown_model_lists_the_configured_and_the_form_and_what_was_meant(
    spec: str, meant: str
) -> None:
    local = {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "models": ["llama3"]}
    registry = ModelRegistry(endpoints={"local": local}, environ={})
    with pytest.raises(LookupError) as caught:
        registry.resolve(spec)
    said = str(caught.value)
    assert said.startswith(f"unknown model {spec!r}: a model is named endpoint:model")
    assert "configured: demo, local:llama3" in said
    assert said.endswith(f"Did you mean {meant}?"), said


async def test_the_notebook_and_the_terminal_say_the_same(workdir: Path, tmp_path: Path) -> None:
    terminal = [
        cli("run", *embedded(workdir, "")).stderr,
        cli("run", *embedded(workdir, "--modle", "demo", "hi")).stderr,
        cli("run", *embedded(workdir, "--model", "gpt-5", "hi")).stderr,
    ]
    lines = ["--model demo", "--modle demo hi", "--model gpt-5 hi"]
    async with kernel(tmp_path) as k:
        await k.run("%load_ext neta_jupyter")
        empty, option, model = await k.json(IN_A_NOTEBOOK.format(lines=lines), timeout=60)
    assert empty == f"{EMPTY_PROMPT} (see %neta help)"
    assert terminal[0].strip() == f"neta-jupyter: error: {EMPTY_PROMPT}"
    assert option == "unknown option --modle: did you mean --model? (see %neta help)"
    assert "error: unknown option --modle: did you mean --model?" in terminal[1]
    said = model.removeprefix("could not start the run: ")
    assert "Did you mean openai:gpt-5?" in said
    assert terminal[2].strip() == f"neta-jupyter: error: {said} (UNKNOWN_MODEL)"
    assert all("Traceback" not in t and "pydantic" not in t for t in terminal), terminal
