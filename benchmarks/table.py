"""The printed table: one Markdown row per figure (it pastes into the README as is)."""

from __future__ import annotations

from .harness import Row

COLUMNS = ("figure", "median", "min", "max", "baseline", "ratio", "target", "met")


def _number(value: float | None, unit: str = "") -> str:
    if value is None:
        return "—"
    if abs(value) >= 10_000:
        text = f"{value:,.0f}"
    elif abs(value) >= 100:
        text = f"{value:.0f}"
    elif abs(value) >= 1:
        text = f"{value:.2f}"
    else:
        text = f"{value:.3g}"
    return f"{text} {unit}".rstrip()


def _cells(row: Row) -> list[str]:
    measured = bool(row.samples)
    met = "—" if row.met is None else ("yes" if row.met else "**no**")
    return [
        row.figure + (f" ({row.note})" if row.note and not measured else ""),
        _number(row.median, row.unit) if measured else "not measured here",
        _number(min(row.samples)) if measured else "—",
        _number(max(row.samples)) if measured else "—",
        _number(row.baseline_median, row.unit),
        "—" if row.ratio is None else f"{row.ratio:.2f}",
        row.target or "—",
        met,
    ]


def render(rows: list[Row], *, header: bool = True) -> str:
    lines = []
    if header:
        lines.append("| " + " | ".join(COLUMNS) + " |")
        lines.append("|" + "|".join("---" for _ in COLUMNS) + "|")
    lines += ["| " + " | ".join(_cells(row)) + " |" for row in rows]
    return "\n".join(lines)
