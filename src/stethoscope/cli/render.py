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
from rich.table import Table

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
    if seconds is None:
        return "-"
    seconds = int(round(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def fmt_time(unix: float | None) -> str:
    return "-" if unix is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(unix))


def rows_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None) -> Table:
    table = Table(title=title, show_lines=False)
    for col in columns:
        table.add_column(str(col))
    for row in rows:
        table.add_row(*(fmt(v) for v in row))
    return table


def kv_table(items: Sequence[tuple[str, Any]], title: str | None = None) -> Table:
    table = Table(title=title, show_header=False)
    table.add_column("", style="bold")
    table.add_column("")
    for key, value in items:
        table.add_row(key, value if isinstance(value, str) else fmt(value))
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
