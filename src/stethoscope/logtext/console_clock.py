"""A trainer's clock in a console log: cumulative clocks and running averages, which the name resolver
would take for a step time, named as what they are; step times from a cumulative clock when a log
prints nothing else (modded-nanogpt's `train_time:…ms`); and times under plain names (`time: 0.36`,
`seconds: 0.41`, `step time (ms): 350`), which are a step time when they stay level from record to record
and a clock when they grow with the steps (`settle_times`); a unit-less one is in ms from a level of 30.
The rule is `detect.step_time_alias.judge_times`, shared with the live throughput detector."""

from __future__ import annotations

from typing import Any

from stethoscope.detect.names import time_like
from stethoscope.detect.step_time_alias import CLOCK as CLOCK_KIND
from stethoscope.detect.step_time_alias import STEP, judge_times, magnitude_scale
from stethoscope.logtext.columns import Columns
from stethoscope.records import STEP_TIME

CLOCK = "perf/train_time_s"
CLOCK_NAMES = {"step avg (ms)": ("perf/step_avg_s", 1e-3), "train time (ms)": (CLOCK, 1e-3),
               "training time (ms)": (CLOCK, 1e-3), "step avg (s)": ("perf/step_avg_s", 1.0),
               "train time (s)": (CLOCK, 1.0)}
A_TIME = "perf/time_s"  # a plain time on step lines (`A_TIME|time`) until `settle_times` names it
_PART = 3.0  # two step times on a line: one this many times the other's is the step, the other a part of it
STEPS_TIME = "perf/steps_time_s"  # the time of the steps since the last record (TensorFlow's `step = N (41.2 sec)`)
UNITLESS_STEP = "perf/step_time_units"  # a step time without a unit (`UNITLESS_STEP|iter time`): ms or s


def time_name(raw: str) -> tuple[str, float] | None:
    """(A_TIME + the name, factor to seconds) for a name that reads as a time without saying whether it is
    the step's (`time`, `seconds`, `interval_runtime`, `Batch (t)`: `detect.names.time_like`), None for any
    other (`data time`, `eval runtime` are not a step's). A name without a unit gets 1.0 here; its values'
    magnitude decides in `settle_times`."""
    scale = time_like(raw)
    return None if scale is None else (f"{A_TIME}|{raw}", scale or 1.0)


def settle_times(columns: Columns) -> None:
    """Name each plain time (A_TIME|name) for what its values say (`detect.step_time_alias.judge_times`, the
    rule the live detector applies): a clock, the step time (in ms when it names no unit and its level is 30
    or more), or a name of its own (not a duration: a date); the first of each kind wins, a second keeps its
    own name, but a step time a `_PART` of another's or less is a part of that step, never the step's."""
    series: dict[str, list[tuple[int, float]]] = {}
    for name, step, value in zip(columns.names, columns.steps, columns.values):
        if name.startswith((A_TIME, UNITLESS_STEP)):
            series.setdefault(name, []).append((step, value))
    taken = set(columns.names)
    rename, factors = {}, {}
    judged = {name: _judge(name, values) for name, values in series.items()}
    longest = max(level for _, level in judged.values()) if judged else 0.0
    for name, (found, _) in sorted(judged.items(), key=lambda item: item[1][1] * _PART < longest):
        raw = name.split("|", 1)[1]
        kind = {None: None, CLOCK_KIND: CLOCK, STEP: STEP_TIME}[found and found[0]]
        rename[name] = kind if kind is not None and kind not in taken else raw.replace(" ", "_")
        taken.add(rename[name])
        if found is not None and found[1] != 1.0 and rename[name] == kind:
            factors[name] = found[1]
    if factors:
        columns.values[:] = [v * factors[n] if n in factors else v for n, v in zip(columns.names, columns.values)]
    columns.names[:] = [rename.get(n, n) for n in columns.names]


def _judge(name: str, values: list[tuple[int, float]]) -> tuple[tuple[str, float] | None, float]:
    """What a plain time's series is (`judge_times`) and its level in seconds: of two step times on a line
    far apart the larger is the step's, the smaller a part of it (ESPnet's `iter_time=1.2e-04 ... train_time=0.417`)."""
    values.sort(key=lambda pair: pair[0])
    raw, level = name.split("|", 1)[1], [v for _, v in values]
    median = sorted(level)[len(level) // 2]
    if name.startswith(UNITLESS_STEP):  # named a step time: only its unit is open
        found: tuple[str, float] | None = (STEP, magnitude_scale(median))
    else:
        found = judge_times(level, 1.0 if time_like(raw) else 0.0)  # values: in seconds if named
    return found, median * found[1] if found and found[0] == STEP else 0.0


def times_named(columns: Any, used: set[str]) -> Any:
    """`columns` (lists or coded) with their plain times named (`settle_times`) and, when a clock is all a
    log has, step times from it (`step_time_from_clock`): the list form when anything changes."""
    if any(name.startswith((A_TIME, UNITLESS_STEP)) for name in used):
        columns = Columns(*columns)
        settle_times(columns)
        used = set(columns.names)
    if STEPS_TIME in used and STEP_TIME not in used:
        columns = Columns(*columns)
        step_time_from_intervals(columns)
        used = set(columns.names)
    if CLOCK in used and STEP_TIME not in used:
        columns = Columns(*columns)  # the list form: step times are appended to it
        step_time_from_clock(columns)
    return columns


def step_time_from_intervals(columns: Columns) -> None:
    """Step times from the times of the steps since the last record: each over the steps it covers (a hook
    that logs every 100 steps prints 100 steps' time); appended after the logged points."""
    last: int | None = None
    for name, step, value, time in list(zip(*columns)):
        if name != STEPS_TIME:
            continue
        if last is not None and step > last:
            for column, item in zip(columns, (STEP_TIME, step, value / (step - last), time)):
                column.append(item)
        last = step


def step_time_from_clock(columns: Columns) -> None:
    """Step times from the clock's differences, per step between the records where it moved; appended after
    the logged points."""
    last: tuple[int, float] | None = None
    for name, step, value, time in zip(*columns):
        if name != CLOCK:
            continue
        if last is not None and step > last[0] and value > last[1]:
            for column, item in zip(columns, (STEP_TIME, step, (value - last[1]) / (step - last[0]), time)):
                column.append(item)
        if last is None or value != last[1]:  # a clock coarser than a record (OpenNMT's whole seconds): from tick
            last = (step, value)  # to tick, never a 0 s step
