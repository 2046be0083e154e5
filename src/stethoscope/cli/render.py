"""Turning results into readable tables, JSON and CSV for the CLI."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from stethoscope.records import json_safe


def console(stderr: bool = False) -> Console:
    """A rich console; when piped, wide enough that tables are not cut at 80 columns."""
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else int(os.environ.get("COLUMNS", "200"))
    return Console(stderr=stderr, highlight=False, soft_wrap=False, width=width)


def fmt(value: Any) -> str:
    """A number as a person reads it: 4 significant digits, thousands grouped; None as '-'."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        if value != 0 and (abs(value) >= 1e6 or abs(value) < 1e-3):
            return f"{value:.3e}"
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    return str(value)


def fmt_duration(seconds: float | None) -> str:
    """Seconds as 1h02m03s, 4m05s, 12s or 0.25s; '-' when unknown."""
    if not isinstance(seconds, (int, float)) or not math.isfinite(seconds):
        return "-"
    if seconds < 0:
        return "-" + fmt_duration(-seconds)
    if seconds < 10 and seconds != int(seconds):
        return f"{seconds:.3g}s"
    seconds = int(round(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def fmt_time(unix: float | None) -> str:
    if not isinstance(unix, (int, float)) or not math.isfinite(unix):
        return "-"
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(unix))
    return stamp + (f".{int(unix * 1000) % 1000:03d}" if unix != int(unix) else "")


# Columns whose numbers are unix times or durations in seconds, printed as dates / 1h02m03s in tables.
_TIME_COLUMNS = ("time", "start_time", "end_time", "imported_at", "started")
_MS_COLUMNS = ("time_ms", "superseded_ms")
_UNIX_2001 = 1e9  # smaller numbers in a time column are relative (seconds since the run's start)


def fmt_cell(column: str, value: Any) -> str:
    """A value under `column`: unix times as dates, relative times as durations, numbers via fmt."""
    name = column.lower()
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        if name in _TIME_COLUMNS or name.endswith("_time"):
            return fmt_time(value) if value >= _UNIX_2001 else f"+{fmt_duration(value)}"
        if name in _MS_COLUMNS:
            return f"+{fmt_duration(value / 1000.0)}"
        if name.endswith("duration_s") or name == "duration":
            return fmt_duration(value)
    return fmt(value)


def rows_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None) -> Table:
    """Cells are plain text: a run named `sweep[lr=1e-3]` is printed as it is, never as markup."""
    table = Table(title=None if title is None else escape(title), show_lines=False)
    for col in columns:
        table.add_column(Text(str(col)))
    for row in rows:
        table.add_row(*(Text(fmt_cell(str(c), v)) for c, v in zip(columns, row)))
    return table


def kv_table(items: Sequence[tuple[str, Any]], title: str | None = None) -> Table:
    table = Table(title=None if title is None else escape(title), show_header=False)
    table.add_column("", style="bold")
    table.add_column("")
    for key, value in items:
        table.add_row(Text(key), Text(value if isinstance(value, str) else fmt(value)))
    return table


def to_json(obj: Any) -> str:
    return json.dumps(json_safe(obj), indent=2, default=str)


def rows_json(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    return to_json([dict(zip(columns, row)) for row in rows])


def rows_csv(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)
    return buf.getvalue()
