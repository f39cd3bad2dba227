"""The ``profile_data`` skill: profile a CSV or Parquet file, reporting progress as JSON lines.

Reads ``{"path": …, "outlier_k": 1.5, "top": 5}`` on stdin; ``NETA_ROOT_DIR`` is the notebook
root the path is relative to. Writes ``progress`` lines per stage and column, then one ``result``
line with a markdown report (or one ``error`` line).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Overall percent at the start of each stage; per-column progress moves within the range.
STAGES = {"load": 0.0, "columns": 10.0, "missing": 60.0, "outliers": 70.0, "summary": 90.0}
_NEXT = {"load": 10.0, "columns": 60.0, "missing": 70.0, "outliers": 90.0, "summary": 100.0}


class ProfileError(Exception):
    """The file cannot be profiled; the message is shown to the user."""


def emit(message: dict[str, Any]) -> None:
    """One protocol line on stdout."""
    sys.stdout.write(json.dumps(message, default=str) + "\n")
    sys.stdout.flush()


def progress(
    stage: str,
    message: str,
    *,
    done: int = 0,
    total: int = 1,
    status: str = "running",
    payload: dict[str, Any] | None = None,
) -> None:
    """Report ``done`` of ``total`` steps of ``stage``; percent is over the whole profile."""
    start, end = STAGES[stage], _NEXT[stage]
    percent = start + (end - start) * (done / total if total else 1.0)
    line: dict[str, Any] = {
        "type": "progress",
        "stage": stage,
        "status": status,
        "percent": round(percent, 1),
        "message": message,
    }
    if total > 1:
        line.update(current=done, total=total)
    if payload:
        line["payload"] = payload
    emit(line)


@dataclass
class Profile:
    """What the stages find."""

    name: str
    rows: int
    memory: int
    columns: list[dict[str, Any]] = field(default_factory=list)
    missing: list[dict[str, Any]] = field(default_factory=list)
    outliers: list[dict[str, Any]] = field(default_factory=list)


# --- stages --------------------------------------------------------------------------------


def resolve(root: Path, raw: object) -> Path:
    """The file, which must exist under the root."""
    if not isinstance(raw, str) or not raw.strip():
        raise ProfileError('give the file to profile as {"path": "data.csv"}')
    path = (root / raw).resolve()
    if not path.is_relative_to(root):
        raise ProfileError(f"{raw} is outside the notebook root")
    if not path.is_file():
        raise ProfileError(f"no file {raw} under the notebook root; list_files shows the files")
    return path


NOT_A_TABLE = (
    "cannot profile {name}: {why}. profile_data profiles tables (CSV, TSV or Parquet files). "
    "To see what a text file says, use read_file instead."
)


def looks_like_a_table(path: Path) -> bool:
    """Whether a text file holds delimited rows: the same number of commas or tabs per line."""
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            lines = [line for line in (fh.readline() for _ in range(20)) if line.strip()]
    except OSError:
        return False
    for delimiter in (",", "\t", ";"):
        counts = {line.count(delimiter) for line in lines}
        if len(lines) >= 2 and len(counts) == 1 and counts != {0}:
            return True
    return False


def load(path: Path) -> Any:
    """Read the table with pandas."""
    try:
        pd: Any = importlib.import_module("pandas")
    except ImportError as exc:
        raise ProfileError("profiling needs pandas: pip install pandas") from exc
    suffix = path.suffix.lower()
    progress("load", f"reading {path.name}")
    if suffix in (".parquet", ".pq"):
        if not any(importlib.util.find_spec(m) for m in ("pyarrow", "fastparquet")):
            raise ProfileError(
                "reading Parquet files needs pyarrow (pip install pyarrow) or fastparquet"
            )
    elif suffix not in (".csv", ".tsv", ".txt"):
        kind = f"{suffix} files are not tables" if suffix else "it has no table extension"
        raise ProfileError(NOT_A_TABLE.format(name=path.name, why=kind))
    elif suffix == ".txt" and not looks_like_a_table(path):
        raise ProfileError(NOT_A_TABLE.format(name=path.name, why="it is text, not a table"))
    try:
        if suffix in (".parquet", ".pq"):
            return pd.read_parquet(path)
        return pd.read_csv(path, sep="\t" if suffix == ".tsv" else ",")
    except (ValueError, UnicodeDecodeError, OSError) as exc:  # pandas' parser errors too
        raise ProfileError(f"could not read {path.name}: {exc}") from exc


def column_stats(frame: Any, top: int) -> list[dict[str, Any]]:
    """Per column: dtype, counts, and numeric statistics or the most frequent values."""
    types = importlib.import_module("pandas.api.types")
    stats: list[dict[str, Any]] = []
    names = list(frame.columns)
    for index, name in enumerate(names):
        series = frame[name]
        info: dict[str, Any] = {
            "column": str(name),
            "dtype": str(series.dtype),
            "count": int(series.count()),
            "distinct": int(series.nunique(dropna=True)),
        }
        if types.is_numeric_dtype(series) and not types.is_bool_dtype(series):
            described = series.describe()
            for key in ("mean", "std", "min", "max"):
                info[key] = _float(described.get(key))
        else:
            counts = series.astype("string").value_counts(dropna=True).head(top)
            info["top"] = [[str(value), int(n)] for value, n in counts.items()]
        stats.append(info)
        progress(
            "columns",
            f"column {name} ({info['dtype']})",
            done=index + 1,
            total=len(names),
            payload={"column": str(name), "dtype": info["dtype"]},
        )
    return stats


def missing_values(frame: Any) -> list[dict[str, Any]]:
    """Columns with missing values, worst first."""
    progress("missing", "counting missing values")
    rows = max(1, len(frame))
    counts = frame.isna().sum()
    found: list[dict[str, Any]] = [
        {"column": str(name), "missing": int(n), "percent": round(100 * int(n) / rows, 1)}
        for name, n in counts.items()
        if int(n) > 0
    ]
    found.sort(key=lambda item: (-item["missing"], item["column"]))
    progress(
        "missing",
        f"{len(found)} column(s) with missing values",
        done=1,
        payload={"columns": {m["column"]: m["missing"] for m in found}},
    )
    return found


def outliers(frame: Any, k: float) -> list[dict[str, Any]]:
    """Per numeric column: values outside [Q1 - k·IQR, Q3 + k·IQR]."""
    types = importlib.import_module("pandas.api.types")
    numeric = [
        c
        for c in frame.columns
        if types.is_numeric_dtype(frame[c]) and not types.is_bool_dtype(frame[c])
    ]
    found: list[dict[str, Any]] = []
    for index, name in enumerate(numeric):
        series = frame[name].dropna()
        if len(series) >= 4:
            q1, q3 = float(series.quantile(0.25)), float(series.quantile(0.75))
            low, high = q1 - k * (q3 - q1), q3 + k * (q3 - q1)
            outside = series[(series < low) | (series > high)]
            if len(outside):
                distance = (outside - (q1 + q3) / 2).abs().sort_values(ascending=False)
                found.append(
                    {
                        "column": str(name),
                        "count": len(outside),
                        "low": low,
                        "high": high,
                        "examples": [_float(outside[i]) for i in distance.index[:5]],
                    }
                )
        progress(
            "outliers",
            f"column {name}",
            done=index + 1,
            total=max(1, len(numeric)),
            payload={"column": str(name)},
        )
    if not numeric:
        progress("outliers", "no numeric columns", done=1)
    return found


# --- the report ----------------------------------------------------------------------------


def report(profile: Profile, k: float) -> str:
    """The markdown report returned to the agent."""
    parts = [
        f"# Profile of `{profile.name}`",
        f"**{profile.rows} rows, {len(profile.columns)} columns**, "
        f"{profile.memory / 1024:.1f} KiB in memory.",
        "## Columns",
        _columns_table(profile.columns),
        "## Missing values",
        _missing_section(profile),
        f"## Outliers (IQR rule, k = {k:g})",
        _outliers_section(profile.outliers),
        "## Summary",
        "\n".join(f"- {line}" for line in _findings(profile)),
    ]
    return "\n\n".join(parts) + "\n"


def _columns_table(columns: list[dict[str, Any]]) -> str:
    rows = ["| column | dtype | non-null | distinct | mean | std | min | max | top values |"]
    rows.append("|---|---|---:|---:|---:|---:|---:|---:|---|")
    for c in columns:
        stats = [_fmt(c.get(key)) for key in ("mean", "std", "min", "max")]
        top = ", ".join(f"{v} ({n})" for v, n in c.get("top", []))
        rows.append(
            f"| {c['column']} | {c['dtype']} | {c['count']} | {c['distinct']} | "
            + " | ".join(stats)
            + f" | {top} |"
        )
    return "\n".join(rows)


def _missing_section(profile: Profile) -> str:
    if not profile.missing:
        return "No missing values."
    total = sum(m["missing"] for m in profile.missing)
    cells = max(1, profile.rows * len(profile.columns))
    lines = [
        f"{total} of {cells} cells ({100 * total / cells:.1f}%) are missing.",
        "",
        "| column | missing | % of rows |",
        "|---|---:|---:|",
    ]
    lines += [f"| {m['column']} | {m['missing']} | {m['percent']:g}% |" for m in profile.missing]
    return "\n".join(lines)


def _outliers_section(found: list[dict[str, Any]]) -> str:
    if not found:
        return "No outliers."
    lines = [
        "| column | outliers | lower bound | upper bound | most extreme |",
        "|---|---:|---:|---:|---|",
    ]
    for o in found:
        examples = ", ".join(_fmt(v) for v in o["examples"])
        lines.append(
            f"| {o['column']} | {o['count']} | {_fmt(o['low'])} | {_fmt(o['high'])} | {examples} |"
        )
    return "\n".join(lines)


def _findings(profile: Profile) -> list[str]:
    findings: list[str] = []
    if profile.missing:
        worst = profile.missing[0]
        findings.append(
            f"Most missing values: `{worst['column']}` ({worst['missing']} missing, "
            f"{worst['percent']:g}% of rows)."
        )
    else:
        findings.append("No missing values.")
    if profile.outliers:
        worst = max(profile.outliers, key=lambda o: o["count"])
        findings.append(
            f"Outliers in {len(profile.outliers)} numeric column(s); most in "
            f"`{worst['column']}` ({worst['count']})."
        )
    else:
        findings.append("No outliers in the numeric columns.")
    constant = [c["column"] for c in profile.columns if c["distinct"] <= 1]
    if constant:
        findings.append(f"Constant columns: {', '.join(f'`{c}`' for c in constant)}.")
    unique = [
        c["column"]
        for c in profile.columns
        if "top" in c and profile.rows > 1 and c["distinct"] == profile.rows
    ]
    if unique:
        findings.append(f"Identifier-like columns: {', '.join(f'`{c}`' for c in unique)}.")
    return findings


def _float(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _fmt(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


# --- entry ---------------------------------------------------------------------------------


def _options(args: dict[str, Any]) -> tuple[float, int]:
    try:
        k, top = float(args.get("outlier_k", 1.5)), int(args.get("top", 5))
    except (TypeError, ValueError) as exc:
        raise ProfileError("outlier_k must be a number and top an integer") from exc
    if not math.isfinite(k) or k < 0 or top < 0:
        raise ProfileError("outlier_k and top must not be negative")
    return k, top


def main() -> int:
    """Run the stages; the exit code is 0 on success and 2 on a reported error."""
    try:
        args = json.loads(sys.stdin.read() or "{}")
        root = Path(os.environ.get("NETA_ROOT_DIR") or ".").resolve()
        path = resolve(root, args.get("path"))
        k, top = _options(args)
        frame = load(path)
        profile = Profile(
            name=path.relative_to(root).as_posix(),
            rows=len(frame),
            memory=int(frame.memory_usage(deep=True).sum()),
        )
        progress("load", f"{profile.rows} rows, {frame.shape[1]} columns", done=1)
        profile.columns = column_stats(frame, top)
        profile.missing = missing_values(frame)
        profile.outliers = outliers(frame, k)
        progress("summary", "writing the report")
        text = report(profile, k)
        progress("summary", "report ready", done=1)
    except ProfileError as exc:
        emit({"type": "error", "message": str(exc)})
        return 2
    emit({"type": "result", "output": text, "files": []})
    return 0


if __name__ == "__main__":
    sys.exit(main())
