"""Step time from a cumulative wall clock, for a log that keeps the time since its start (W&B's `_runtime`,
an `elapsed` column, TensorBoard's wall times: `perf/elapsed_s`) but logs no step time or rate.

Between two records the clock moved by what their steps took: (clock - last clock) / (steps between)
seconds a step, the eval or checkpoint in between included, as a console's per-step time includes it.
A clock printed in whole seconds cannot time steps shorter than a second: until it shows a fraction
it is read only over spans of `COARSE_SPAN_S` or more (a whole-second tick is then 3% of the span).
A clock that goes back (a resume, a restarted process) starts over.
"""

from __future__ import annotations

import math
from typing import Any

COARSE_SPAN_S = 30.0


class StepClock:
    """Seconds per step between the records of a cumulative clock."""

    def __init__(self) -> None:
        self.last: tuple[int, float] | None = None
        self.fine = False  # the clock has shown a fraction of a second

    def seconds(self, step: int, clock: float | None) -> float | None:
        if clock is None or not math.isfinite(clock) or clock < 0:
            return None
        self.fine = self.fine or not float(clock).is_integer()
        last = self.last
        if last is None or step <= last[0] or clock < last[1]:
            self.last = (step, clock)
            return None
        span = clock - last[1]
        if span <= 0 or (not self.fine and span < COARSE_SPAN_S):
            return None  # the same tick: the span grows until the clock has moved enough to time it
        self.last = (step, clock)
        return span / (step - last[0])

    def state_dict(self) -> dict[str, Any]:
        return {"last": list(self.last) if self.last else None, "fine": self.fine}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        last = state.get("last")
        self.last = (int(last[0]), float(last[1])) if last else None
        self.fine = bool(state.get("fine", False))
