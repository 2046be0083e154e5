"""A step time logged under a name that does not say it is one (`time`, `seconds`, `interval_runtime`,
`Batch (t)`): `detect.names.time_like` picks the candidate by its words, its first records decide. A clock
(a timestamp, the wall time since the start) grows on every record; a step time hovers around its level.
The unit is the name's when it gives one, else the magnitude's: values of 30 and more are milliseconds
(a step of half a minute is rare in a log that does not name its units; 30 ms steps are everyday).
Used by `detect.throughput` when the run logs no step time or rate under a known name.
"""

from __future__ import annotations

import math
from typing import Any

from stethoscope.detect.names import time_like

_TRIAL = 8  # records a candidate is watched before it is adopted or rejected
_SEARCH_RECORDS = 64  # records after which no new candidate is looked for
_MS_FROM = 30.0  # a unit-less median at or above this is milliseconds


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
        trial = s["trial"]
        rising = all(b > a for a, b in zip(trial, trial[1:]))
        if rising or min(trial) <= 0:  # a clock, or not a duration
            s["rejected"].append(s["key"])
            s["key"], s["trial"] = None, []
            return
        if not s["scale"]:
            median = sorted(trial)[len(trial) // 2]
            s["scale"] = 1e-3 if median >= _MS_FROM else 1.0
        s["adopted"], s["trial"] = True, []

    def state_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, list) else v for k, v in self.s.items()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.s.update({k: list(v) if isinstance(v, list) else v for k, v in state.items()})
