"""A trainer's clock in a console log: cumulative clocks and running averages, which the name resolver
would take for a step time, named as what they are; and step times from a cumulative clock when a log
prints nothing else (modded-nanogpt's `train_time:…ms`)."""

from __future__ import annotations

from stethoscope.importers.base import Columns
from stethoscope.records import STEP_TIME

CLOCK = "perf/train_time_s"
CLOCK_NAMES = {"step avg (ms)": ("perf/step_avg_s", 1e-3), "train time (ms)": (CLOCK, 1e-3),
               "training time (ms)": (CLOCK, 1e-3), "step avg (s)": ("perf/step_avg_s", 1.0),
               "train time (s)": (CLOCK, 1.0)}


def step_time_from_clock(columns: Columns) -> None:
    """Step times from the clock's differences, per step between consecutive records; appended after the
    logged points."""
    last: tuple[int, float] | None = None
    for name, step, value, time in zip(*columns):
        if name != CLOCK:
            continue
        if last is not None and step > last[0] and value >= last[1]:
            for column, item in zip(columns, (STEP_TIME, step, (value - last[1]) / (step - last[0]), time)):
                column.append(item)
        last = (step, value)
