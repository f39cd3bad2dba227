"""The small tasks of the agent evaluation: the files and kernel state they need, and the checks.

Every task has one expected fact, computed here from the data it is asked about, so the check
does not depend on how the model words its answer: a number must appear in the answer (thousands
separators allowed), a word must appear (any case), or the run must have produced a figure.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NOTES = """Team notes, week 38

The weekly planning meeting moves to Thursday at 10:00 in room B2.
Bring the Q3 sales figures and the open support tickets.
"""

SETTINGS = """[server]
host = 0.0.0.0
port = 8421
workers = 4

[storage]
backend = s3
bucket = harbour-archive
"""

PROJECT = """# Harbour Tracker

Harbour Tracker follows container ships from the moment they are announced until they leave the
quay. Planners see every berth on one screen and get a warning when two ships would overlap.

## Architecture

The web front end talks to a small API service. Positions arrive from the port authority's AIS
feed every thirty seconds and are matched to the announced ships.

## Storage

All ship, berth and schedule records live in PostgreSQL; raw AIS messages are kept for ninety
days in object storage and then deleted.

## Team

Six developers in two squads; releases go out every second Tuesday.
"""

REGIONS = ("North", "South", "East", "West")
PRODUCTS = {"anchor": 120.0, "buoy": 35.5, "chain": 64.25, "fender": 18.0, "winch": 410.0}


def sales_rows() -> list[tuple[int, str, str, int, float]]:
    """(order_id, region, product, units, price): 40 orders, the same every time."""
    names = list(PRODUCTS)
    rows = []
    for n in range(1, 41):
        product = names[(n * 3) % len(names)]
        rows.append((1000 + n, REGIONS[(n * 7) % 4], product, 1 + (n * 5) % 9, PRODUCTS[product]))
    return rows


def sales_csv() -> str:
    """``sales.csv`` as written to the task folder."""
    lines = ["order_id,region,product,units,price"]
    lines += [f"{o},{r},{p},{u},{price:.2f}" for o, r, p, u, price in sales_rows()]
    return "\n".join(lines) + "\n"


def scores() -> list[float]:
    """The ``score`` column of the kernel's dataframe (250 rows)."""
    return [round(40 + (n * 37) % 61 + (n % 7) * 0.3, 1) for n in range(250)]


KERNEL_SETUP = f"""
%reset -f
import pandas as pd
threshold = 0.75
df = pd.DataFrame({{
    "customer": [f"c{{n:03d}}" for n in range(250)],
    "score": {scores()!r},
    "income": [None if n % 9 == 0 else 20000 + n * 130 for n in range(250)],
}})
"""
"""Run in the kernel before the tasks: the variables the kernel tasks ask about."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one run produced."""

    answer: str
    tools: list[str]
    images: int
    ending: str
    seconds: float
    steps: int
    trace: list[str] = field(default_factory=list)
    """Each call with its arguments and the start of its result, to see what went wrong."""
    failed: int = 0
    """Tool calls that failed (a refused edit, an error)."""
    retried: int = 0
    """Failed calls the model followed with another call rather than answering."""
    notebook: dict[str, Any] | None = None
    """A notebook task's notebook as saved after the run."""
    probe: str = ""
    """What the task's probe printed in the kernel after the run."""


Check = Callable[[Outcome], bool]


@dataclass(frozen=True, slots=True)
class Task:
    """One prompt and the fact its answer must contain."""

    name: str
    prompt: str
    expected: str
    """The fact, as printed in the report."""
    check: Check = field(repr=False)
    notebook: bool = False
    """Run bound to the task notebook (:mod:`.notebook_tasks`) and its kernel."""
    probe: str = ""
    """Code run in the kernel after the run; what it prints is ``Outcome.probe``."""
    meanwhile: Callable[[dict[str, Any]], None] | None = field(default=None, repr=False)
    """The user's change to the saved notebook while the model thinks about its first step."""


_FENCED = re.compile(r"```.*?(?:```|$)", re.DOTALL)


def prose(outcome: Outcome) -> str:
    """The answer without code blocks: a fact must be stated, not only quoted in a listing."""
    return _FENCED.sub(" ", outcome.answer)


def number(value: float, tolerance: float = 0.0) -> Check:
    """The answer mentions ``value`` (within ``tolerance``)."""

    def check(outcome: Outcome) -> bool:
        found = re.findall(r"-?\d+(?:\.\d+)?", prose(outcome).replace(",", ""))
        return any(math.isclose(float(f), value, abs_tol=tolerance + 1e-9) for f in found)

    return check


def word(text: str) -> Check:
    """The answer mentions ``text`` as a word, in any case."""
    pattern = re.compile(rf"\b{re.escape(text)}\b", re.IGNORECASE)
    return lambda outcome: bool(pattern.search(prose(outcome)))


def figure(outcome: Outcome) -> bool:
    """The run drew a figure."""
    return outcome.images > 0


def tasks() -> list[Task]:
    """The twelve tasks: facts in files, a CSV, the kernel's variables and a plot."""
    rows = sales_rows()
    units = sum(r[3] for r in rows)
    north = sum(r[1] == "North" for r in rows)
    priciest = max(rows, key=lambda r: r[4])[2]
    mean = statistics.fmean(scores())
    return [
        Task("notes_day", "What does notes.txt say? On which day is the meeting?", "Thursday",
             word("Thursday")),
        Task("settings_port", "Which port does settings.ini configure for the server?", "8421",
             number(8421)),
        Task("project_database", "According to project.md, which database stores the records?",
             "PostgreSQL", word("PostgreSQL")),
        Task("csv_rows", "How many data rows does sales.csv have, not counting the header?",
             "40", number(40)),
        Task("csv_units", "What is the total of the units column in sales.csv?", str(units),
             number(units)),
        Task("csv_north", "How many orders in sales.csv are from the North region?", str(north),
             number(north)),
        Task("csv_priciest", "Which product in sales.csv has the highest price?", priciest,
             word(priciest)),
        Task("var_threshold", "What is the value of the variable threshold in my kernel?",
             "0.75", number(0.75)),
        Task("df_rows", "How many rows does the dataframe df have?", "250", number(250)),
        Task("df_missing", "Which column of the dataframe df has missing values?", "income",
             word("income")),
        Task("df_mean", "What is the mean of the score column of df, to one decimal?",
             f"{mean:.1f}", number(round(mean, 1), tolerance=0.05)),
        Task("df_plot", "Plot a histogram of the score column of df.", "a figure", figure),
    ]  # fmt: skip


def write_files(root: Path) -> None:
    """The task folder's files."""
    (root / "notes.txt").write_text(NOTES)
    (root / "settings.ini").write_text(SETTINGS)
    (root / "project.md").write_text(PROJECT)
    (root / "sales.csv").write_text(sales_csv())
