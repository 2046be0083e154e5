"""A step time logged under a name that does not say it is one (`time`, `seconds`, `interval_runtime`,
`Batch (t)`): `detect.names.time_like` picks the candidate by its words, its first records decide. A clock
(a timestamp, the wall time since the start) grows on every record; a step time hovers around its level.
The unit is the name's when it gives one, else the magnitude's: values of 30 and more are milliseconds
(a step of half a minute is rare in a log that does not name its units; 30 ms steps are everyday).
`judge_times` is that rule, once: `detect.throughput` applies it to a live run's first records when the
run logs no step time or rate under a known name, the console reader (`logtext.console_clock`) to a
whole log's series.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from stethoscope.detect.names import time_like

_TRIAL = 8  # records a candidate is watched before it is adopted or rejected
_SEARCH_RECORDS = 64  # records after which no new candidate is looked for
_MS_FROM = 30.0  # a unit-less median at or above this is milliseconds
_CLOCK_FROM = 4  # records before a series can be called a clock (3 step times in order that double: 1 in 20)
_NO_STEP_FROM = 1e6  # a unit-less level no step takes (16 min in ms): a date, an id, a count
CLOCK, STEP = "clock", "step"


def judge_times(values: Sequence[float], scale: float) -> tuple[str, float] | None:
    """What a series logged under a time name is (`values` in step order; `scale` the factor to seconds its
    name gives, 0.0 when it gives none) and the factor to seconds: (CLOCK, f) when it grows from record to
    record without ever falling: twice from 0, to twice its first value over 4 records at least, or 3 times
    over 8 (a timestamp, the time since the start, printed as finely as a step's time or coarser, OpenNMT's
    `400 sec`: never a step time), (STEP, f) when it hovers around a
    level, None when it is no duration (a negative value, no level above 0, a date)."""
    if not values or min(values) < 0:
        return None
    median = sorted(values)[len(values) // 2]
    rises = sum(b > a for a, b in zip(values, values[1:]))
    rising = len(values) >= 3 and all(b >= a for a, b in zip(values, values[1:])) and (
        values[0] == 0 and rises >= 2  # from 0 (a step takes time: 0 s is none), printed coarser than a step
        or len(values) >= _CLOCK_FROM and values[-1] > 2 * values[0] > 0
        or len(values) >= _TRIAL and rises >= _CLOCK_FROM - 1)  # OpenNMT's `400 sec` of a log's excerpt
    if rising:
        return CLOCK, scale or 1.0
    if median <= 0 or (not scale and median >= _NO_STEP_FROM):
        return None
    return STEP, scale or magnitude_scale(median)


def magnitude_scale(level: float) -> float:
    """The factor to seconds of a step time whose name gives no unit, from its level (median)."""
    return 1e-3 if level >= _MS_FROM else 1.0


class StepTimeAlias:
    """Finds, checks and reads the step time of a run that logs it under another name."""

    def __init__(self) -> None:
        self.s: dict[str, Any] = {"key": None, "scale": 0.0, "trial": [], "adopted": False, "rejected": [],
                                  "records": 0}

    def seconds(self, values: dict[str, float]) -> float | None:
        """This record's step time in seconds, once a candidate was adopted; None before and without one."""
        s = self.s
        s["records"] += 1
        if s["key"] is None and not self._pick(values):
            return None
        v = values.get(s["key"])
        if v is None or not math.isfinite(v):
            return None
        if s["adopted"]:
            return v * s["scale"]
        s["trial"].append(v)
        if len(s["trial"]) >= _TRIAL:
            self._decide()
        return None

    @property
    def key(self) -> str | None:
        return self.s["key"] if self.s["adopted"] else None

    def _pick(self, values: dict[str, float]) -> bool:
        s = self.s
        if s["records"] > _SEARCH_RECORDS:
            return False
        for k in values:
            if k not in s["rejected"]:
                scale = time_like(k)
                if scale is not None:
                    s["key"], s["scale"], s["trial"] = k, scale, []
                    return True
        return False

    def _decide(self) -> None:
        s = self.s
        found = judge_times(s["trial"], s["scale"])
        if found is None or found[0] != STEP:  # a clock, or not a duration
            s["rejected"].append(s["key"])
            s["key"], s["trial"] = None, []
            return
        s["scale"], s["adopted"], s["trial"] = found[1], True, []

    def state_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, list) else v for k, v in self.s.items()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.s.update({k: list(v) if isinstance(v, list) else v for k, v in state.items()})
