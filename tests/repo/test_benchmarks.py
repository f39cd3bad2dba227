"""``python -m benchmarks --quick B1`` runs end to end and prints its table.

A correctness smoke test of the benchmark harness only: performance is measured by running the
benchmarks, never asserted here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
COLUMNS = ["figure", "median", "min", "max", "baseline", "ratio"]


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def test_quick_b1_prints_a_table_with_the_expected_columns() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NETA_", "JPY_"))}
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "B1"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    table = [line for line in result.stdout.splitlines() if line.startswith("|")]
    header = cells(table[0])
    assert header[: len(COLUMNS)] == COLUMNS
    rows = [cells(line) for line in table[2:]]
    assert [row[0].split(",")[0] for row in rows] == [
        "B1 throughput SSE",
        "B1 throughput WebSocket",
    ]
    for row in rows:
        assert len(row) == len(header)
        median, baseline, ratio = row[1], row[4], row[5]
        assert median.endswith("events/s") and baseline.endswith("events/s"), row
        assert float(ratio) > 0, row
