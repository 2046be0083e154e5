"""One series a spike detector watches (the loss or the grad norm): its clean baseline, recent raw
values, cached noise and open incident."""

from __future__ import annotations

import math
from typing import Any

from stethoscope.detect.config import DetectConfig
from stethoscope.detect.stats import RollingMedian, StepSeries, Window, diff_spread, median

_SIGMA_REFRESH = 16  # recompute the O(window) noise estimate every this many pushes
_RECENT = 64  # raw (step, value) pairs kept for look-backs
_RAW_N = 32  # the newest raw values `raw_sigma` measures...
_RAW_MIN = 8  # ...when there are at least this many
_RES_SCALE = 1.07  # Gaussian noise less its running median of 5 spreads 0.93 sigma (simulated, 3,000 x 32 values)


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

    def raw_sigma(self) -> float:
        """Robust spread (`stats.diff_spread`) of the newest raw values before the current one, spikes included: the
        series' own spread. The clean window keeps only values below the spike bar, so on a loss that swings
        x5 batch to batch (an OCR loss at 2e-4 printing 0.0002-0.005) it holds the low ones alone: a level and a
        step-to-step noise far under the series' own, every ordinary swing 40-100 "sigmas" above it, and (never
        let in) the bar never rises. The raw spread keeps such swings inside the noise."""
        raw = [v for _, v in self.recent.items()[-_RAW_N - 1:-1] if math.isfinite(v)]
        if len(raw) < _RAW_MIN:
            return 0.0
        # about a running median of 5, not the overall median: a falling (or curving) loss is not spread
        res = [raw[i] - median(raw[i - 2:i + 3]) for i in range(2, len(raw) - 2)]
        return _RES_SCALE * diff_spread(res)

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


def calm_before(t: Track, level: float, tol: float) -> bool:
    """Did the newest record come out of the blue, not top records already risen? Risen: the two records before it
    both above the level by more than `tol` (the recovery bar). One such record is the noise's tail (a per-batch
    loss has heavy tails: 1 in 20); two in a row are a lead-up."""
    seen = t.recent.items()[-3:-1]
    return bool(seen) and not (len(seen) == 2 and all(v > level + tol for _, v in seen))


def echo(inc: dict[str, Any]) -> bool:
    """A hard batch and its echo: a loss spike out of the blue (`calm_before`) that peaked on its first record, the
    one after it (the step that applies the update the bad batch's gradient made, still in the optimizer's
    momentum) lower, falling back, and the next back at the level. The run undid it by itself in two steps, as a
    one-record blip does: no one needs to act. A spike that holds or builds on its second record, or that tops
    records already risen (a climb peaking, e.g. after an LR jump), is no echo."""
    return (inc["records"] <= 2 and inc["peak_step"] == inc["start"] and inc.get("calm_before", False)
            and inc["level"] < inc["last"] < inc["first"])
