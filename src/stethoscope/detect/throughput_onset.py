"""Where a slowdown began, and what came before it: the onset fit over the records around a streak, and the
start-up a baseline of only the run's first records is. Used by `detect.throughput`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stethoscope.detect.slowdown import ramp_onset, streak_onset, window_onset
from stethoscope.detect.throughput_causes import EVAL

EVAL_STALL = 3.0  # an eval's record this many times the slowest record no eval explains: the eval's own time

ONSET_LOOKBACK = 16  # records before a streak searched for its onset
_NAMED = {EVAL, "data", "gc"}  # causes a slow record names (`detect.throughput_causes.slow_causes`)


def fit_onset(raw: Sequence[float], raw_steps: Sequence[int], slow: list[list[Any]], level: float, step: int,
              t: float, window: int | None, skip: frozenset[int] = frozenset()) -> int:
    """Where the slowdown whose slow records so far are `slow` (the last at `step`, time `t`, not yet in `raw`)
    began: the step-plus-ramp changepoint (`detect.slowdown.ramp_onset`) over the streak and the
    `ONSET_LOOKBACK` records before it (a streak may have started late, broken by a fast record of a noisy
    series, or a ramp may have climbed out of the noise slowly), records of a stall on top left out, a
    running-mean step time fitted as its windows' averages (`window_onset`); else the streak's first record
    halfway to its median. Records at `skip` are left out: slow for a reason the log names (an eval, a data
    wait), not the new level."""
    n = len(slow) - 1 + ONSET_LOOKBACK
    if len(raw_steps) != len(raw) or len(raw) < n:
        return streak_onset(slow, level)
    values, xs = list(raw[len(raw) - n:]) + [t], [float(x) for x in list(raw_steps)[len(raw_steps) - n:] + [step]]
    if skip:
        kept = [i for i, x in enumerate(xs) if int(x) not in skip]
        if len(kept) >= 3:
            values, xs = [values[i] for i in kept], [xs[i] for i in kept]
    return window_onset(xs, values, ramp_onset(xs, values), window)


def startup(s: dict[str, Any], raw_steps: Sequence[int], onset: int, min_records: int) -> list[int] | None:
    """[records, first step, last step] of a baseline that is only the run's first records (fewer than
    `min_records` before the onset, the log starting at the run's start): start-up, not its usual speed.
    A log that starts later (an excerpt, a resume, after a gap) has no start-up in it."""
    after = 1 + sum(1 for x in raw_steps if x >= onset)
    before = s["records"] - s.get("since", 0) - after
    if before >= min_records or len(raw_steps) < before or "first_step" not in s:
        return None
    first = s["first_step"]
    last = max((x for x in raw_steps if x < onset), default=first)
    return [before, first, last] if first <= last - first else None


def streak_evals(slow: list[list[Any]]) -> frozenset[int]:
    """`eval_stalls` of a streak of slow records ([step, time, level, dip, causes] each), a data wait or a GC pause
    the record logs counted with the evals: an eval's or a loader restart's time at the streak's end (no record
    after it yet to show it a stall on top) is no part of the level the onset is fitted to."""
    named = eval_stalls([[x[0], x[1], x[2], [EVAL] if set(x[4]) & _NAMED else x[4]] for x in slow])
    tail = []
    for x in reversed(slow):  # only the streak's last records: an earlier one had records after it, in the fit
        if x[0] not in named:
            break
        tail.append(x[0])
    return frozenset(tail)


def eval_stalls(records: list[list[Any]]) -> frozenset[int]:
    """The steps of `records` ([step, time, level, causes] each) that an eval explains and that stand
    `EVAL_STALL` times above every record no eval explains: the eval's time, no part of a climb. None where no
    record is unexplained (a log that evaluates at every record: its eval flag says nothing of the time)."""
    own = [x[1] for x in records if EVAL not in x[3]]
    if not own:
        return frozenset()
    top = EVAL_STALL * max(own)
    return frozenset(x[0] for x in records if EVAL in x[3] and x[1] >= top)
