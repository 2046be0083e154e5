"""One series a spike detector watches (the loss or the grad norm): its clean baseline, recent raw
values, cached noise and open incident."""

from __future__ import annotations

import math
from typing import Any

from stethoscope.detect.config import DetectConfig
from stethoscope.detect.stats import RollingMedian, StepSeries, Window

_SIGMA_REFRESH = 16  # recompute the O(window) noise estimate every this many pushes
_RECENT = 16  # raw (step, value) pairs kept for look-backs


class Track:
    """One series: clean baseline window, raw recent values, cached noise, open incident."""

    def __init__(self, config: DetectConfig) -> None:
        self.window = Window(config.spike_window)
        self.levels = RollingMedian(config.level_window)  # the newest clean values, for the recent level
        self.recent = StepSeries(_RECENT)
        self.sigma = 0.0
        self.sigma_age = 0
        self.incident: dict[str, Any] | None = None

    def level(self) -> float:
        return self.levels.median()

    def recent_level(self, since: int) -> float | None:
        """Median of the newest raw values from step `since` on (an open incident's): where the series is now."""
        values = sorted(v for _, v in self.recent.since(since)[-8:] if math.isfinite(v))
        return values[len(values) // 2] if values else None

    def data_sigma(self) -> float:
        if self.sigma_age <= 0 or len(self.window) < 4 * _SIGMA_REFRESH:
            self.sigma = self.window.diff_sigma()
            self.sigma_age = _SIGMA_REFRESH
        return self.sigma

    def push(self, value: float) -> None:
        self.window.push(value)
        self.levels.push(value)
        self.sigma_age -= 1

    def reset(self) -> None:
        self.window.clear()
        self.levels.clear()
        self.sigma_age = 0
        self.incident = None

    def state_dict(self) -> dict[str, Any]:
        return {"window": self.window.state_dict(), "recent": self.recent.state_dict(), "incident": self.incident}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.window.load_state_dict(state["window"])
        self.levels.clear()
        for v in self.window.last(self.levels.size):
            self.levels.push(v)
        self.recent.load_state_dict(state["recent"])
        self.incident = state.get("incident")
        self.sigma_age = 0
