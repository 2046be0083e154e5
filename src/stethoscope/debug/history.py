"""What a run's store says around a finding: the loss, grad norm and LR before it, and the batch's ids."""

from __future__ import annotations

import json
import math
import os
import statistics
from dataclasses import dataclass, field
from typing import Any

from stethoscope import records as R


@dataclass
class History:
    """The series of one run (rank 0, or the lowest rank), read once; empty when no run was given."""

    series: dict[str, tuple[list[int], list[float]]] = field(default_factory=dict)
    batch_ids: dict[int, list[Any]] = field(default_factory=dict)
    source: str = ""

    def get(self, name: str) -> tuple[list[int], list[float]]:
        return self.series.get(name, ([], []))

    def level_before(self, name: str, step: int, window: int = 50) -> float | None:
        """The median finite value of `name` over the `window` records before `step`."""
        steps, values = self.get(name)
        before = [v for s, v in zip(steps, values) if s < step and math.isfinite(v)][-window:]
        return statistics.median(before) if before else None

    def at(self, name: str, step: int) -> float | None:
        """The value at `step`, or the last one before it."""
        steps, values = self.get(name)
        last = None
        for s, v in zip(steps, values):
            if s > step:
                break
            last = v
        return last


def read_history(run: Any, steps: tuple[int, ...] = ()) -> History:
    """Read the loss, grad norm, LR and the batch ids of `steps` from `run` (a run directory or an open
    `stethoscope.store.query.RunReader`); an empty History for None."""
    if run is None:
        return History()
    from stethoscope.store.query import RunReader, open_run

    if isinstance(run, (str, os.PathLike)):
        with open_run(run) as reader:
            return _read(reader, steps)
    if isinstance(run, RunReader):
        return _read(run, steps)
    raise ValueError(f"run must be a run directory or a RunReader, got {type(run).__name__}")


def _read(reader: Any, steps: tuple[int, ...]) -> History:
    h = History(source=str(reader.path))
    for name in (R.LOSS, R.GRAD_NORM, R.LR):
        h.series[name] = reader.series(name)
    rank = reader.ranks[0]
    for step in steps:
        _, rows = reader.query("SELECT ids FROM batches WHERE rank = ? AND step = ?", (rank, step))
        if rows:
            try:
                ids = json.loads(rows[0][0])
            except ValueError:
                continue
            if isinstance(ids, list):
                h.batch_ids[step] = ids
    return h
