"""A step SQLite cannot store (past 64-bit integers) costs its own point, not the batch it came in (user-trial-4:
`mon.step(2**70, loss=1.0)` among good steps left the run with no point at all, and `dropped_points` 0)."""

from __future__ import annotations

import time

import pytest

from stethoscope import Monitor, open_run
from stethoscope.store.db import RunStore, rank_path


def test_the_rest_of_the_batch_is_written_and_the_failure_raised(tmp_path):
    store = RunStore(rank_path(tmp_path / "r", 0))
    now = time.time()
    with pytest.raises(OverflowError, match="1 point"):
        store.write_points([("train/loss", 1, 2.0, now), ("train/loss", 2**70, 1.0, now), ("train/loss", 3, 1.5, now)])
    store.write_points([("train/loss", 4, 1.4, now)])  # the store goes on
    store.close()
    with open_run(tmp_path / "r") as reader:
        steps, values = reader.series_arrays("train/loss", 0)
    assert steps.tolist() == [1, 3, 4] and values.tolist() == [2.0, 1.5, 1.4]


def test_a_monitor_keeps_the_good_steps_around_a_huge_one(tmp_path):
    with Monitor(tmp_path / "run", serve=False) as mon:
        for s in range(5):
            mon.step(s, loss=3.0 - s / 10)
        mon.step(2**70, loss=1.0)
        mon.step(5, loss=2.5)
    with open_run(tmp_path / "run") as reader:
        steps, _ = reader.series_arrays("train/loss", 0)
    assert steps.tolist() == [0, 1, 2, 3, 4, 5]
