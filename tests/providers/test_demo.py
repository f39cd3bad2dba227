"""The demo model, driven step by step as the runtime would drive it."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest

from neta_jupyter.providers.base import (
    Image,
    Message,
    Model,
    ModelRequest,
    ReasoningPart,
    StreamPart,
    TextPart,
    ToolCall,
    ToolCallPart,
    ToolDefinition,
    UsagePart,
)
from neta_jupyter.providers.demo import DemoModel
from neta_jupyter.runtime import Runtime, RuntimeConfig
from neta_jupyter.store import Store
from neta_jupyter.tools.files import DEFAULT_READ_BYTES

ALL_TOOLS = ("list_files", "read_file", "list_variables", "inspect_variable", "python")
LISTING = "notes/\nREADME.md\t88 bytes\ndata.csv\t1234 bytes\nphoto.png\t20480 bytes"
CSV = "price,qty,city\n1.5,2,Paris\n2.0,1,Oslo\n3.25,4,Lima\n"
VARIABLES = "x: int\ndf: DataFrame (100, 3)\nname: str"
INSPECTION = (
    "df: DataFrame (100, 3)\n"
    "columns:\n"
    "  price: float64, 5 missing\n"
    "  qty: int64, 0 missing\n"
    "  city: object, 12 missing"
)
RESULTS = {
    "list_files": LISTING,
    "read_file": CSV,
    "list_variables": VARIABLES,
    "inspect_variable": INSPECTION,
    "python": "",
}


def tools(*names: str) -> list[ToolDefinition]:
    return [ToolDefinition(n, f"the {n} tool", {"type": "object"}) for n in names]


def text_of(parts: list[StreamPart]) -> str:
    return "".join(p.text for p in parts if isinstance(p, TextPart))


def reasoning_of(parts: list[StreamPart]) -> str:
    return "".join(p.text for p in parts if isinstance(p, ReasoningPart))


def call_of(parts: list[StreamPart]) -> ToolCall | None:
    fragments = [p for p in parts if isinstance(p, ToolCallPart)]
    if not fragments:
        return None
    head = fragments[0]
    assert head.id is not None
    assert head.name is not None
    return ToolCall(head.id, head.name, "".join(p.arguments for p in fragments))


class Conversation:
    """Plays the runtime: streams a step, records the call, feeds back a result."""

    def __init__(self, prompt: str, offered: tuple[str, ...] = ALL_TOOLS) -> None:
        self.messages = [Message("user", "earlier question"), Message("assistant", "old answer")]
        self.messages.append(Message("user", prompt))
        self.offered = offered
        self.calls: list[ToolCall] = []

    def request(self) -> ModelRequest:
        return ModelRequest("You are a helpful agent.", list(self.messages), tools(*self.offered))

    async def step(self) -> list[StreamPart]:
        return [part async for part in DemoModel().stream(self.request())]

    def record(self, parts: list[StreamPart]) -> ToolCall:
        """The step must be a tool call; it is recorded as the assistant message."""
        call = call_of(parts)
        assert call is not None, f"expected a tool call, got {text_of(parts)!r}"
        self.messages.append(Message("assistant", tool_calls=[call], reasoning=reasoning_of(parts)))
        self.calls.append(call)
        return call

    async def call(self) -> ToolCall:
        return self.record(await self.step())

    def reply(self, call: ToolCall, content: str) -> None:
        self.messages.append(Message("tool", content, tool_call_id=call.id, name=call.name))

    async def answer(self) -> str:
        parts = await self.step()
        assert call_of(parts) is None, f"expected an answer, got {call_of(parts)}"
        return text_of(parts)

    async def run(self, results: dict[str, str]) -> str:
        """Answer every call from ``results`` until the model answers; return the answer."""
        for _ in range(10):
            parts = await self.step()
            if call_of(parts) is None:
                return text_of(parts)
            call = self.record(parts)
            self.reply(call, results[call.name])
        raise AssertionError("the model never answered")

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.calls]


def test_is_a_model_named_demo() -> None:
    model = DemoModel()
    assert isinstance(model, Model)
    assert model.name == "demo"
    with pytest.raises(ValueError):
        DemoModel(pace=-1)


async def test_reasoning_comes_first_and_usage_last() -> None:
    for prompt in ("what files are here?", "hello there"):
        parts = await Conversation(prompt).step()
        kinds = [type(p) for p in parts]
        first_other = next(i for i, k in enumerate(kinds) if k is not ReasoningPart)
        assert first_other > 3, "reasoning streams word by word"
        assert ReasoningPart not in kinds[first_other:]
        assert kinds[-1] is UsagePart
        assert kinds.count(UsagePart) == 1
        assert reasoning_of(parts).startswith("The user wants")
        assert prompt in reasoning_of(parts)


async def test_lists_files_then_answers_with_the_names() -> None:
    chat = Conversation("What files are here?")
    call = await chat.call()
    assert (call.name, json.loads(call.arguments)) == ("list_files", {"path": "."})
    chat.reply(call, LISTING)
    answer = await chat.answer()
    for fact in ("`README.md`", "`data.csv`", "1,234 bytes", "`notes/`"):
        assert fact in answer
    assert answer.startswith("### ")
    assert "**Next**" in answer


async def test_reads_the_named_file_and_summarises_it() -> None:
    chat = Conversation("Summarise data.csv please")
    call = await chat.call()
    assert (call.name, json.loads(call.arguments)) == ("read_file", {"path": "data.csv"})
    chat.reply(call, CSV)
    answer = await chat.answer()
    assert "`data.csv` has 4 lines" in answer
    assert "`price`, `qty`, `city`" in answer
    assert "1.5,2,Paris" in answer


async def test_nested_path_is_read() -> None:
    chat = Conversation("what does notes/a.txt say?")
    call = await chat.call()
    assert json.loads(call.arguments) == {"path": "notes/a.txt"}


async def test_reads_the_first_listed_text_file_when_none_is_named() -> None:
    chat = Conversation("look at the files here and summarise one")
    answer = await chat.run(RESULTS)
    assert chat.names == ["list_files", "read_file"]
    assert json.loads(chat.calls[1].arguments) == {"path": "README.md"}
    assert "`README.md`" in answer


async def test_dataframe_question_inspects_then_plots_the_worst_column() -> None:
    chat = Conversation("Which columns of df have missing values? Plot the worst column.")
    answer = await chat.run(RESULTS)
    assert chat.names == ["list_variables", "inspect_variable", "python"]
    assert json.loads(chat.calls[1].arguments) == {"name": "df"}
    code = json.loads(chat.calls[2].arguments)["code"]
    assert "import matplotlib.pyplot as plt" in code
    assert "df[column]" in code
    assert "'city'" in code, "city has the most missing values"
    assert "plt.show()" in code
    compile(code, "<plot>", "exec")
    assert "`city` (12)" in answer
    assert "the worst is `city`" in answer
    assert "100 rows and 3 columns" in answer


async def test_inspects_the_first_dataframe_when_none_is_named() -> None:
    chat = Conversation("describe my data")
    await chat.run(RESULTS | {"list_variables": "n: int\nsales: DataFrame (10, 2)\nlog: DataFrame"})
    assert chat.names == ["list_variables", "inspect_variable", "python"]
    assert json.loads(chat.calls[1].arguments) == {"name": "sales"}
    assert json.loads(chat.calls[2].arguments) == {"code": "print(sales.describe())"}


async def test_a_busy_kernel_goes_by_the_variables_of_the_prompt_and_asks_for_python() -> None:
    # list_variables answered from the variables taken with the prompt: a cell is running, so
    # inspecting would wait for it; python is asked for at once (it queues behind the cell).
    busy = (
        "A cell is running in the kernel, so these are your variables as of when the prompt ran:\n"
        "n: int = 3\nsales: DataFrame (10, 2), columns: units (int64), price (float64)"
    )
    chat = Conversation("which variables do I have? use python to describe sales")
    answer = await chat.run(RESULTS | {"list_variables": busy, "python": "mean  5.0"})
    assert chat.names == ["list_variables", "python"]
    assert json.loads(chat.calls[1].arguments) == {"code": "print(sales.describe())"}
    assert "`sales` (DataFrame (10, 2)" in answer
    assert "mean  5.0" in answer


async def test_missing_values_are_counted_when_the_inspection_does_not_say() -> None:
    chat = Conversation("which columns of df have missing values?")
    await chat.run(RESULTS | {"inspect_variable": "df: DataFrame (100, 3)"})
    assert chat.names == ["list_variables", "inspect_variable", "python"]
    assert json.loads(chat.calls[2].arguments) == {"code": "print(df.isna().sum())"}


async def test_arithmetic_runs_python_and_cites_the_printed_value() -> None:
    chat = Conversation("what is 17*23?")
    call = await chat.call()
    assert (call.name, json.loads(call.arguments)) == ("python", {"code": "print(17*23)"})
    chat.reply(call, "391\n")
    answer = await chat.answer()
    assert "**391**" in answer
    assert "print(17*23)" in answer


async def test_tools_not_offered_are_never_called() -> None:
    chat = Conversation("what is 17*23?", offered=("list_files", "read_file"))
    answer = await chat.run(RESULTS)
    assert chat.names == []
    assert "`python`" in answer
    assert "not enabled" in answer

    chat = Conversation("which columns of df have missing values?", offered=("inspect_variable",))
    await chat.run(RESULTS)
    assert chat.names == ["inspect_variable"]


async def test_denied_tool_is_not_retried_and_the_answer_says_so() -> None:
    chat = Conversation("what is 17*23?")
    answer = await chat.run({"python": "Error: the user denied permission to run this tool call"})
    assert chat.names == ["python"]
    assert "denied" in answer
    assert "did not retry" in answer


async def test_failed_tool_is_reported_and_the_turn_goes_on() -> None:
    chat = Conversation("what files are here? then summarise data.csv")
    answer = await chat.run(RESULTS | {"list_files": "Error: permission problem"})
    assert chat.names == ["list_files", "read_file"]
    assert "`list_files` call failed" in answer
    assert "`price`, `qty`, `city`" in answer


async def test_no_tools_means_a_direct_friendly_answer() -> None:
    answer = await Conversation("tell me a joke").answer()
    assert '"tell me a joke"' in answer
    assert "demo model" in answer
    assert answer.count(". ") >= 3


async def test_call_ids_follow_the_assistant_messages() -> None:
    chat = Conversation("which columns of df have missing values?")
    await chat.run(RESULTS)
    # the earlier turn's answer is assistant message 0, so this turn starts at 1
    assert [c.id for c in chat.calls] == ["call_1", "call_2"]


async def test_arguments_stream_in_two_to_four_fragments_of_valid_json() -> None:
    chat = Conversation("Which columns of df have missing values? Plot the worst column.")
    for _ in range(3):
        parts = await chat.step()
        fragments = [p for p in parts if isinstance(p, ToolCallPart)]
        assert fragments[0].index == 0
        assert fragments[0].arguments == ""
        assert all(p.index == 0 and p.id is None and p.name is None for p in fragments[1:])
        assert 2 <= len(fragments) - 1 <= 4
        assert all(p.arguments for p in fragments[1:])
        json.loads("".join(p.arguments for p in fragments))
        chat.reply(await chat.call(), RESULTS[chat.calls[-1].name])


async def test_same_request_gives_identical_parts() -> None:
    prompt = "Which columns of df have missing values? Plot the worst column."
    one, two = Conversation(prompt), Conversation(prompt)
    assert await one.run(RESULTS) == await two.run(RESULTS)
    assert one.messages == two.messages
    first, second = await one.step(), await one.step()
    assert first == second
    assert "**Next**" in text_of(first)


async def test_usage_is_estimated_from_characters() -> None:
    chat = Conversation("hello there")
    parts = await chat.step()
    usage = parts[-1]
    assert isinstance(usage, UsagePart)
    request_chars = len("You are a helpful agent.") + len("earlier questionold answer")
    request_chars += len("hello there") + sum(
        len(t.name) + len(t.description) + len('{"type": "object"}') for t in tools(*ALL_TOOLS)
    )
    assert usage.input_tokens == request_chars // 4
    produced = len(reasoning_of(parts)) + len(text_of(parts))
    assert usage.output_tokens == produced // 4 > 50


async def test_pace_zero_does_not_sleep_and_pace_sleeps_between_tokens() -> None:
    sleeps: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        sleeps.append(seconds)

    request = Conversation("hello there").request()
    parts = [p async for p in DemoModel(sleep=fake_sleep).stream(request)]
    assert sleeps == []
    paced = [p async for p in DemoModel(pace=0.015, sleep=fake_sleep).stream(request)]
    assert paced == parts
    assert sleeps == [0.015] * (len(parts) - 1)


async def test_pace_really_waits() -> None:
    request = Conversation("what is 17*23?").request()
    loop = asyncio.get_running_loop()
    count = len([p async for p in DemoModel().stream(request)])
    started = loop.time()
    assert len([p async for p in DemoModel(pace=0.001).stream(request)]) == count
    assert loop.time() - started >= 0.001 * (count - 1) * 0.9


async def test_a_file_named_without_extension_is_found_in_the_listing() -> None:
    chat = Conversation("summarise the README")
    answer = await chat.run(RESULTS | {"read_file": "# Sales\nQuarterly numbers.\n"})
    assert chat.names == ["list_files", "read_file"]
    assert json.loads(chat.calls[1].arguments) == {"path": "README.md"}
    assert "Quarterly numbers." in answer


async def test_a_named_csv_is_loaded_and_its_named_column_plotted() -> None:
    chat = Conversation("plot qty from data.csv")
    await chat.run(RESULTS)
    assert chat.names == ["read_file", "python"]
    code = json.loads(chat.calls[1].arguments)["code"]
    assert 'data_df = pd.read_csv("data.csv")' in code
    assert "column = 'qty'" in code
    compile(code, "<plot>", "exec")


async def test_a_traceback_is_reported_as_a_failure() -> None:
    chat = Conversation("run python please")
    traceback = 'Traceback (most recent call last):\n  File "<cell>", line 1\nNameError: x'
    answer = await chat.run({"python": traceback})
    assert chat.names == ["python"]
    assert "`python` call failed (NameError: x)" in answer


async def test_earlier_turns_do_not_count_as_done() -> None:
    chat = Conversation("what files are here?")
    chat.messages[1:1] = [
        Message("user", "what files are here?"),
        Message("assistant", tool_calls=[ToolCall("call_0", "list_files", '{"path": "."}')]),
        Message("tool", LISTING, tool_call_id="call_0", name="list_files"),
    ]
    call = await chat.call()
    assert call.name == "list_files"
    assert call.id == "call_2"


async def test_call_ids_never_repeat_one_in_the_history() -> None:
    chat = Conversation("what files are here?")
    earlier = Message("assistant", tool_calls=[ToolCall("call_2", "read_file", "{}")])
    chat.messages.insert(0, earlier)
    call = await chat.call()
    assert call.id == "call_3"


async def test_results_of_other_tools_are_quoted() -> None:
    chat = Conversation("hello there")
    other = ToolCall("x1", "clean_data", '{"table": "sales"}')
    chat.messages.append(Message("assistant", tool_calls=[other]))
    chat.messages.append(Message("tool", "cleaned 12 rows", tool_call_id="x1", name="clean_data"))
    answer = await chat.answer()
    assert "`clean_data` returned" in answer
    assert "cleaned 12 rows" in answer


async def test_profiling_prompt_runs_the_skill_and_reports_it() -> None:
    chat = Conversation("profile sales.csv with the profiling skill", ("run_skill", "read_file"))
    call = await chat.call()
    assert call.name == "run_skill"
    assert json.loads(call.arguments) == {"name": "profile_data", "args": {"path": "sales.csv"}}
    chat.reply(
        call, "# Profile of sales.csv\n\n- 120 rows\n\n[process log: neta-process-events/x.jsonl]"
    )
    answer = await chat.answer()
    assert "# Profile of sales.csv" in answer and "120 rows" in answer
    assert "process log" not in answer


async def test_a_summary_of_a_long_file_gives_its_totals_not_the_part_read(tmp_path: Path) -> None:
    """Asked to summarise the README, the demo once said it had the lines it was shown."""
    # A README longer than one read: the project's own docs pages, one after another.
    docs = sorted((Path(__file__).parents[2] / "docs").glob("*.md"))
    readme = b"\n".join(page.read_bytes() for page in docs)
    assert len(readme) > DEFAULT_READ_BYTES, "the README is longer than one read"
    (tmp_path / "README.md").write_bytes(readme)
    store = Store(tmp_path / "db")
    runtime = Runtime(store, RuntimeConfig(root_dir=tmp_path, data_dir=tmp_path, demo_pace=0.0))
    try:
        run = await runtime.start("owner", "summarise README.md", model="demo")
        await runtime.wait(run.request_id)
        events = [json.loads(e.payload) for e in await store.events.read_after(run.request_id, -1)]
    finally:
        store.close()
    answer = "".join(e["data"]["text"] for e in events if e["eventType"] == "TEXT_DELTA")
    lines = readme.count(b"\n") + (not readme.endswith(b"\n"))
    assert f"`README.md` has {lines:,} lines ({len(readme):,} bytes)." in answer
    assert "- I read lines 1 to " in answer


async def test_a_partial_read_is_reported_with_the_file_totals() -> None:
    chat = Conversation("summarise notes.txt")
    call = await chat.call()
    assert call.name == "read_file"
    chat.reply(
        call,
        "Only lines 1-3 of notes.txt, which has 9,120 lines (401,554 bytes) in all. Lines "
        "4-9120 are not shown: read on with read_file offset=4 (and limit for fewer lines):\n"
        "alpha\nbeta\ngamma\n",
    )
    answer = await chat.answer()
    assert "`notes.txt` has 9,120 lines (401,554 bytes)." in answer
    assert "- I read lines 1 to 3 of it" in answer
    assert "```text\nalpha\nbeta\ngamma\n```" in answer


async def test_gives_each_file_of_a_comparison_to_a_sub_agent_and_compares_their_answers() -> None:
    prompt = "compare notes.txt, data.csv and README.md"
    chat = Conversation(prompt, (*ALL_TOOLS, "delegate"))
    call = await chat.call()
    assert call.name == "delegate"
    tasks = json.loads(call.arguments)["tasks"]
    assert [t["name"] for t in tasks] == ["notes.txt", "data.csv", "README.md"]
    assert all(t["name"] in t["task"] for t in tasks), "each task names its file"
    sections = [
        f"### {i}. {t['name']} (completed, run r_{i})\nTask: {t['task']}\nAnswer:\n"
        f"### What I found\n\n- `{t['name']}` has {i} lines ({i * 100} bytes).\n\n"
        f"```text\nline one of {t['name']}\n```"
        for i, t in enumerate(tasks, 1)
    ]
    chat.reply(call, "Sub-agents finished: 3 of 3 completed.\n\n" + "\n\n".join(sections))
    answer = await chat.answer()
    for i, t in enumerate(tasks, 1):
        assert f"- `{t['name']}` has {i} lines ({i * 100} bytes)." in answer
        assert f"It begins: `line one of {t['name']}`" in answer
    assert "`README.md` is the largest (300 bytes), `notes.txt` the smallest" in answer
    assert chat.names == ["delegate"], "what the sub-agents found is not read again"


async def test_without_sub_agents_a_comparison_reads_each_file_itself() -> None:
    chat = Conversation("compare notes.txt and data.csv")
    assert [(await chat.call()).name, (await chat.call()).name] == ["read_file"] * 2


async def test_suggests_next_only_data_that_is_there() -> None:
    chat = Conversation("what is 17*23? compute it in python", ("python",))
    answer = await chat.run({"python": "391\n"})
    follow_up = answer.split("**Next**")[1]
    assert "df" not in follow_up, follow_up
    assert "another calculation" in follow_up

    chat = Conversation("plot the price column of df")
    answer = await chat.run(RESULTS)
    assert chat.names[-1] == "python"
    assert '"plot a histogram of df"' in answer.split("**Next**")[1]


NOTEBOOK_TOOLS = ("list_variables", "inspect_variable", "read_notebook", "insert_cell", "run_cell")


def png(width: int, height: int) -> bytes:
    from PIL import Image as Pillow

    buffer = io.BytesIO()
    Pillow.new("RGB", (width, height), (30, 120, 200)).save(buffer, format="PNG")
    return buffer.getvalue()


async def test_names_a_cells_figure_as_the_person_knows_it_not_by_its_placeholder() -> None:
    chat = Conversation("add a cell that plots the qty column of df", NOTEBOOK_TOOLS)
    results = {"list_variables": VARIABLES, "inspect_variable": INSPECTION}
    for _ in range(2):
        call = await chat.call()
        chat.reply(call, results[call.name])
    insert = await chat.call()
    arguments = json.loads(insert.arguments)
    assert insert.name == "insert_cell" and arguments["run"] is True, "added and run in one call"
    assert "plot" in arguments["source"]
    label = f"{insert.id}-02528e50-figure-1.png (4x3 PNG)"
    chat.messages.append(
        Message(
            "tool",
            "insert of cell 02528e50 applied, new hash 36895b1edd. It ran; its output:\n"
            "[image: figure-1.png]\n",
            tool_call_id=insert.id,
            name="insert_cell",
            images=[Image("image/png", png(4, 3), label)],
        )
    )
    answer = await chat.answer()
    assert "- I added cell `02528e50` to the notebook:" in answer
    assert "- I ran it; it drew a figure, now in the notebook under the cell." in answer
    assert "I was shown the picture it made: figure-1.png (4x3 PNG), received as a 4x3" in answer
    assert "[image:" not in answer and f"{insert.id}-" not in answer


async def test_names_a_notebook_cell_by_the_short_form_of_its_uuid() -> None:
    uuid = "3f2a9c1b-5d4e-4f60-8a7b-9c0d1e2f3a4b"
    read = (
        f"Notebook work.ipynb: 1 cells.\n--- cell 1 of 1 · id {uuid} · code · hash abc123\nx = 1\n"
    )
    chat = Conversation("comment the last cell: the setup", ("read_notebook", "edit_cell"))
    answer = await chat.run({"read_notebook": read, "edit_cell": "edit applied"})
    edit = next(c for c in chat.calls if c.name == "edit_cell")
    assert json.loads(edit.arguments)["cell_id"] == uuid, "the tool gets the whole id"
    assert "`3f2a9c1b`" in answer and uuid not in answer


async def test_says_a_figure_was_drawn_not_the_placeholder_of_it() -> None:
    chat = Conversation("plot the price column of df")
    answer = await chat.run(RESULTS | {"python": "[image: figure-1.png]\n"})
    assert chat.names[-1] == "python"
    assert "- It drew a figure, shown with the call." in answer
    assert "[image:" not in answer and "It printed" not in answer
