"""What a slow record says its step spent the time on beyond the model: an eval, a GC pause, a data wait.

An eval logged at step N sits in the time of the record that carries it (nanoGPT, a W&B history: the
eval runs at the top of the iteration it is logged with) or in the next record's (the HF Trainer logs
the eval after step N's time was taken). The next record is blamed on the eval only when the eval's own
record was not slow: a data-loader stall right after an eval is the loader's, not the eval's.
Used by `detect.throughput`.
"""

from __future__ import annotations

import math
from typing import Any

from stethoscope.records import DATA_WAIT, GC_PAUSE, STEP_TIME

EVAL = "eval"


def slow_causes(s: dict[str, Any], values: dict[str, float], prev_step: int | None,
                excess_s: float | None) -> list[str]:
    """`s`: the detector's state (`eval_step`, `eval_slow`); `excess_s`: the step time above the level, in
    seconds, when the record logs a step time and a level is known."""
    why = []
    eval_step = s.get("eval_step")
    if eval_step is not None and prev_step is not None and eval_step >= prev_step:
        if eval_step > prev_step or not s.get("eval_slow"):
            why.append(EVAL)
    if excess_s is not None and excess_s > 0:
        for name, key in ((GC_PAUSE, "gc"), (DATA_WAIT, "data")):
            v = values.get(name)
            if v is not None and math.isfinite(v) and v >= 0.5 * excess_s:
                why.append(key)
    return why


def step_time_excess(values: dict[str, float], level_s: float) -> float | None:
    v = values.get(STEP_TIME)
    return None if v is None else v - level_s
