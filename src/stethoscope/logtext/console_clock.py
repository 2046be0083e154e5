"""A trainer's clock in a console log: cumulative clocks and running averages, which the name resolver
would take for a step time, named as what they are; step times from a cumulative clock when a log
prints nothing else (modded-nanogpt's `train_time:…ms`); and times under plain names (`time: 0.36`,
`seconds: 0.41`, `step time (ms): 350`), which are a step time when they stay level from record to record
and a clock when they grow with the steps (`settle_times`)."""

from __future__ import annotations

import re
from typing import Any

from stethoscope.logtext.columns import Columns
from stethoscope.records import STEP_TIME

CLOCK = "perf/train_time_s"
CLOCK_NAMES = {"step avg (ms)": ("perf/step_avg_s", 1e-3), "train time (ms)": (CLOCK, 1e-3),
               "training time (ms)": (CLOCK, 1e-3), "step avg (s)": ("perf/step_avg_s", 1.0),
               "train time (s)": (CLOCK, 1.0)}
A_TIME = "perf/time_s"  # a plain time on step lines (`A_TIME|time`) until `settle_times` names it
_TIME_WORDS = {"time", "seconds", "secs", "sec", "runtime", "duration", "took"}
_PER_STEP = {"step", "batch", "iter", "iteration", "interval", "train", "training", "per", "wall"}
_UNITS = {"": 1.0, "s": 1.0, "sec": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "min": 60.0}
_WITH_UNIT = re.compile(r"^(.*?)(?: \(([^)]*)\))?$")


def time_name(raw: str) -> tuple[str, float] | None:
    """(A_TIME + the name, factor to seconds) for a name made of a time word and words that say per what
    (`time`, `seconds`, `batch time (ms)`), None for any other (`data time`, `eval runtime` are not a step's)."""
    m = _WITH_UNIT.match(raw)
    words, unit = set(m[1].replace("/", " ").split()), m[2] or ""  # type: ignore[index]
    if unit not in _UNITS or not words & _TIME_WORDS or not words <= _TIME_WORDS | _PER_STEP:
        return None
    return f"{A_TIME}|{m[1]}", _UNITS[unit]  # type: ignore[index]


def settle_times(columns: Columns) -> None:
    """Name each plain time (A_TIME|name) for what it is: a clock when it grows with the step over at least
    three records (to more than twice its first value), else the step time; the first of each kind wins, a
    second keeps its own name."""
    series: dict[str, list[tuple[int, float]]] = {}
    for name, step, value in zip(columns.names, columns.steps, columns.values):
        if name.startswith(A_TIME):
            series.setdefault(name, []).append((step, value))
    taken = set(columns.names)
    rename = {}
    for name, values in series.items():
        values.sort(key=lambda pair: pair[0])
        grows = len(values) >= 3 and all(a[1] <= b[1] for a, b in zip(values, values[1:])) and \
            values[-1][1] > 2 * values[0][1] > 0
        kind = CLOCK if grows else STEP_TIME
        rename[name] = kind if kind not in taken else name.split("|", 1)[1].replace(" ", "_")
        taken.add(rename[name])
    columns.names[:] = [rename.get(n, n) for n in columns.names]


def times_named(columns: Any, used: set[str]) -> Any:
    """`columns` (lists or coded) with their plain times named (`settle_times`) and, when a clock is all a
    log has, step times from it (`step_time_from_clock`): the list form when anything changes."""
    if any(name.startswith(A_TIME) for name in used):
        columns = Columns(*columns)
        settle_times(columns)
        used = set(columns.names)
    if CLOCK in used and STEP_TIME not in used:
        columns = Columns(*columns)  # the list form: step times are appended to it
        step_time_from_clock(columns)
    return columns


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
