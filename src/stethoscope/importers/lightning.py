"""PyTorch Lightning CSVLogger `metrics.csv` (+ the `hparams.yaml` beside it, into meta).

CSVLogger writes one wide, sparse table: a row per logging call, empty cells for the metrics that
call did not log. `x_step` columns are the per-step values (named `x`), `x_epoch` columns the epoch
aggregates (kept as `x_epoch`); `lr-AdamW[/pgN]` is the LearningRateMonitor; a unit in a column name
is converted (`step_time_ms` → `perf/step_time_s` in seconds). Steps are the `step` column
(Lightning's global step, from 0).
"""

from __future__ import annotations

import csv
import io
import math
import re
from pathlib import Path
from typing import Any

from stethoscope.errors import InputError
from stethoscope.importers.base import ImportedRun
from stethoscope.logtext.names import EPOCH, FileNames, metric_name, scaled_row
from stethoscope.importers.source import is_text, log_name, read_text
from stethoscope.logtext.table import PointTable, describe, gc_paused, to_float
from stethoscope.importers.tabular import RowSplits, checked_rows

NAME = "lightning_csv"
_HPARAM = re.compile(r"^([A-Za-z_][\w.-]*):\s*(.*?)\s*$")
_EVAL_PREFIX = re.compile(r"(?i)^(?:val|valid|validation|eval|test)[_/]")


class LightningCSVImporter:
    """`metrics.csv` written by Lightning's CSVLogger."""

    name = NAME

    def sniff(self, path: Path, head: str) -> bool:
        if not is_text(head) or not log_name(path).endswith("metrics.csv"):
            return False
        try:
            header = next(csv.reader(io.StringIO(head.partition("\n")[0])), [])
        except csv.Error:  # binary or damaged: not a CSVLogger file
            return False
        return "step" in header

    def read(self, path: Path) -> ImportedRun:
        rows = checked_rows(path, csv.reader(io.StringIO(read_text(path))))
        header = next(rows, None)
        if not header or "step" not in header:
            raise InputError(path, "expected a CSVLogger header with a `step` column", line=1)
        with gc_paused():
            table, warnings = _read_rows(path, header, rows)
            columns, rejected = table.build_columns()
        warnings += describe(rejected, lambda line: f"{path}:{line}")
        meta: dict[str, Any] = {"columns": header}
        hparams = read_hparams(path.parent / "hparams.yaml")
        if hparams:
            meta["hparams"] = hparams
        return ImportedRun(str(path), NAME, None, meta, warnings, columns=columns)


def _read_rows(path: Path, header: list[str], rows: Any) -> tuple[PointTable, list[str]]:
    table = PointTable()
    step_at = header.index("step")
    names = FileNames()
    splits = RowSplits(header)
    columns = [(i, names(_per_step(c)).name) for i, c in enumerate(header)
               if i not in (step_at, splits.at) and not _eval_batches(c, header)]
    warnings: list[str] = []
    last_epoch: tuple[int, float] | None = None
    for line, row in enumerate(rows, 2):
        step = _int(row[step_at]) if len(row) > step_at else None
        if step is None:
            if any(cell.strip() for cell in row):
                warnings.append(f"{path}:{line}: no integer `step`; row left out")
            continue
        values = splits.renamed(row, {name: row[i] for i, name in columns if i < len(row) and row[i] != ""}, columns)
        epoch = to_float(values.get(EPOCH))
        if epoch is not None and (step, epoch) == last_epoch:
            del values[EPOCH]  # Lightning repeats the epoch on every row of a step
        last_epoch = (step, epoch) if epoch is not None else last_epoch
        if values:
            table.add_row(line, step, None, *scaled_row(values, names.scales))
    return table, warnings


def column_name(column: str) -> str:
    """Our name for a CSVLogger column (`train_loss_step` → train/loss, `val_loss` → eval/loss …)."""
    return metric_name(_per_step(column))


def _eval_batches(column: str, header: list[str]) -> bool:
    """Whether `column` holds a validation's per-batch values (`val_loss_step` beside `val_loss_epoch`): its rows
    count the eval's batches (step 0, 1, .. of the val loader, or the one training step repeated), not training
    steps; laid on the training axis they drown the epoch's aggregate, which is the eval's record."""
    return (column.endswith("_step") and _EVAL_PREFIX.match(column) is not None
            and column[: -len("_step")] + "_epoch" in header)


def _per_step(column: str) -> str:
    return column[: -len("_step")] if column.endswith("_step") and column != "_step" else column


def _int(cell: str) -> int | None:
    number = to_float(cell)
    return int(number) if number is not None and number.is_integer() else None


def read_hparams(path: Path) -> dict[str, Any]:
    """The top-level `key: value` lines of a simple YAML file (no PyYAML needed); {} when absent."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return {}
    out: dict[str, Any] = {}
    for line in text.splitlines():
        m = _HPARAM.match(line)
        if m and m.group(2) not in ("", "|", ">"):
            out[m.group(1)] = _scalar(m.group(2))
    return out


def _scalar(text: str) -> Any:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("null", "~", "none"):
        return None
    number = to_float(text)
    if number is None or not math.isfinite(number):
        return text
    return int(number) if number.is_integer() and "." not in text and "e" not in lowered else number
