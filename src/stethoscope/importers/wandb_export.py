"""W&B's UI export of a chart holding several runs side by side (`Step`, `run-a - train/loss`,
`run-a - train/loss__MIN`, `run-a - train/loss__MAX`, `run-b - train/loss`, ...; a cell blank where a run
logged nothing at that step): each run is a run of its own, diagnosed on its own, as each run of an MLflow
store is. A header whose metric columns all name one run (or none) is one run, read as a plain CSV.
"""

from __future__ import annotations

import re

_RUN_COLUMN = re.compile(r"^(.+?) - (.+)$")


def side_by_side(header: list[str], rows: list[list[str]],
                 at: int) -> list[tuple[str, list[str], list[list[str]]]] | None:
    """(run name, its header, its rows) for each run of an export of several, the step column (`at`) first in
    each; None when the table is no such export (one run, or a metric column naming no run)."""
    runs: dict[str, list[int]] = {}
    for i, column in enumerate(header):
        found = _RUN_COLUMN.match(column)
        if i == at or column.startswith("_"):  # W&B's own `_step`, `_runtime`
            continue
        if found is None:
            return None
        runs.setdefault(found.group(1), []).append(i)
    if len(runs) < 2:
        return None
    out = []
    for name, columns in runs.items():
        names = [header[at]] + [_RUN_COLUMN.match(header[i]).group(2) for i in columns]  # type: ignore[union-attr]
        out.append((name, names, [[_cell(row, at)] + [_cell(row, i) for i in columns] for row in rows]))
    return out


def _cell(row: list[str], i: int) -> str:
    return row[i] if i < len(row) else ""
