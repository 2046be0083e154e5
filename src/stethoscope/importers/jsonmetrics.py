"""One JSON object of metric series, as training scripts dump them at the end of a run.

* Keras' `History` (`json.dump(model.fit(...).history, f)`): `{"loss": [..], "val_loss": [..], ...}`, one
  value an epoch; the step is the epoch, from 0 (as Keras' CSVLogger numbers them).
* Sacred's `metrics.json` and its kind: `{"loss": {"steps": [..], "values": [..], "timestamps": [..]}}`.

A file that is one object but neither (a config, a results summary) is refused with what was expected.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from stethoscope.errors import InputError
from stethoscope.importers.base import ImportedRun
from stethoscope.importers.source import is_text, read_text
from stethoscope.importers.tabular import unix_time
from stethoscope.logtext.names import FileNames, scaled_row
from stethoscope.logtext.table import PointTable, describe, to_float

NAME = "json_metrics"
# a key holding a list that starts with a number, or a series object: what the head must show
_SERIES = re.compile(r'"[^"]+"\s*:\s*(?:\[\s*(?:-?[\d.]|NaN|Infinity|-Infinity|null)|\{\s*"(?:steps|values)"\s*:)')
_NOT_OURS = ("log_history", '"architectures"', '"model_type"')  # HF trainer state, model configs


class JSONMetricsImporter:
    """A JSON object of metric series: Keras' History, Sacred's metrics.json."""

    name = NAME

    def sniff(self, path: Path, head: str) -> bool:
        body = head.lstrip("\ufeff \t\r\n")
        if not (is_text(head) and body.startswith("{") and _SERIES.search(body, 0, 4096) is not None
                and not any(mark in head for mark in _NOT_OURS)):
            return False
        first, _, rest = body.partition("\n")
        return not (rest.strip() and _is_object(first))  # an object a line, more after it: JSON lines

    def read(self, path: Path) -> ImportedRun:
        try:
            data = json.loads(read_text(path))
        except ValueError as exc:
            raise InputError(path, f"not one JSON object of metric series ({exc})") from None
        if not isinstance(data, dict):
            raise InputError(path, "expected one JSON object of metric series, {name: [values]} or "
                                   "{name: {steps: [..], values: [..]}}")
        table = PointTable()
        names = FileNames()
        sacred = {k: v for k, v in data.items() if isinstance(v, dict) and isinstance(v.get("values"), list)}
        lists = {k: v for k, v in data.items() if isinstance(v, list) and v and all(_numeric(x) for x in v)}
        if sacred:
            dialect = "sacred"
            rows: dict[int, dict[str, Any]] = {}
            times: dict[int, float | None] = {}
            for key, series in sacred.items():
                _merge_series(rows, times, names(key).name, series)
            for step in sorted(rows):
                table.add_row(step, step, times.get(step), *scaled_row(rows[step], names.scales))
        elif lists:
            dialect = "keras_history"
            width = max(len(v) for v in lists.values())
            for epoch in range(width):
                row = {names(k).name: v[epoch] for k, v in lists.items() if epoch < len(v) and v[epoch] is not None}
                if row:
                    table.add_row(epoch, epoch, None, *scaled_row(row, names.scales))
        else:
            raise InputError(path, "no metric series in this JSON object: expected {name: [numbers]} (Keras' "
                                   "History) or {name: {steps: [..], values: [..]}} (Sacred's metrics.json)")
        columns, rejected = table.build_columns()
        warnings = describe(rejected, lambda origin: f"{path}: step {origin}")
        meta = {"dialect": dialect, "series": sorted(sacred or lists)}
        if dialect == "keras_history":
            meta["notes"] = {"step": "one value an epoch: the step is the epoch, from 0"}
        return ImportedRun(str(path), NAME, None, meta, warnings, columns=columns)


def _is_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def _numeric(x: Any) -> bool:
    return x is None or isinstance(x, (int, float)) and not isinstance(x, bool)


def _merge_series(rows: dict[int, dict[str, Any]], times: dict[int, float | None], name: str,
                  series: dict[str, Any]) -> None:
    """One series' points into `rows` ({step: {name: value}}), its times into `times`."""
    values = series["values"]
    steps = series.get("steps")
    steps = steps if isinstance(steps, list) and len(steps) == len(values) else list(range(len(values)))
    stamps = series.get("timestamps")
    stamps = stamps if isinstance(stamps, list) and len(stamps) == len(values) else [None] * len(values)
    for step, value, when in zip(steps, values, stamps):
        number = to_float(step)
        if number is None or not math.isfinite(number) or not number.is_integer() or value is None:
            continue
        rows.setdefault(int(number), {})[name] = value
        if when is not None and times.get(int(number)) is None:
            times[int(number)] = unix_time(when)
