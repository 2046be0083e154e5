"""The values behind a running mean: what a trainer averaged before it printed, from the printed means.

A series printed as the mean of its last W values (mmengine's LogProcessor prints every loss so, W =
`window_size`, default 10; `DetectConfig.eval_loss_window`) hides what the detectors look for: a frozen
model's eval loss repeats one value, but the mean of the last W still moves until W evals have passed, and a
rise at the last evals is spread over W of them. Consecutive means give the values back exactly: the first W
average every value so far (e_k = k m_k - (k-1) m_(k-1)), later ones a window that lost its oldest value and
gained one (e_k = W (m_k - m_(k-1)) + e_(k-W)). The print's rounding grows in these differences: each value
comes back with the bound of its error, which the frozen-weights test takes as its tolerance.
"""

from __future__ import annotations

import math
from typing import Any

from stethoscope.detect.frozen import decimals


class RunningMeanUndo:
    """Feed it the printed means in order (`push`); it gives each underlying value and its error bound."""

    def __init__(self, window: int) -> None:
        self.window = window
        self.count = 0  # means seen
        self.places = 0  # the most decimals a mean was printed with: the print's rounding
        self.last: float | None = None  # the previous mean
        self.values: list[list[float]] = []  # [value, error bound] of the last `window` values
        self.broken = False  # a value could not be recovered (a NaN in the window): means pass through

    def push(self, mean: float) -> tuple[float, float]:
        """The value the trainer averaged into `mean`, and the bound of its error (0 for an exact float)."""
        self.places = max(self.places, decimals(mean))
        unit = 0.5 * 10.0 ** -self.places
        self.count += 1
        k, w = self.count, self.window
        if self.broken or not math.isfinite(mean):
            return self._keep(mean, unit, broken=True)
        if self.last is None:
            return self._keep(mean, unit)
        if k <= w:
            value, err = k * mean - (k - 1) * self.last, (2 * k - 1) * unit
        else:
            old, old_err = self.values[-w]
            value, err = w * (mean - self.last) + old, 2 * w * unit + old_err
        if not math.isfinite(value) or (value < 0 <= mean):
            return self._keep(mean, unit, broken=True)  # not a running mean of this window (a resumed log)
        return self._keep(value, err, mean=mean)

    def _keep(self, value: float, err: float, mean: float | None = None, broken: bool = False) -> tuple[float, float]:
        self.broken = self.broken or broken
        self.last = value if mean is None else mean
        self.values.append([value, err])
        del self.values[: -self.window]
        return value, (0.0 if err < 1e-12 * max(1.0, abs(value)) else err)

    def state_dict(self) -> dict[str, Any]:
        return {"count": self.count, "places": self.places, "last": self.last,
                "values": [list(v) for v in self.values], "broken": self.broken}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.count = state.get("count", 0)
        self.places = state.get("places", 0)
        self.last = state.get("last")
        self.values = [list(v) for v in state.get("values", [])]
        self.broken = state.get("broken", False)
