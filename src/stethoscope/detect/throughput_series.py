"""Which series a throughput detector watches, and one record's time per step from it: the step time,
or the inverse of the first throughput series the run logs (tokens/s, samples/s, TFLOP/s, MFU), or a step
time under another name (`detect.step_time_alias`), or else a clock's seconds per step
(`detect.throughput_clock`). Used by `detect.throughput`."""

from __future__ import annotations

import math
from typing import Any

from stethoscope.detect.names import ELAPSED
from stethoscope.detect.step_time_alias import StepTimeAlias
from stethoscope.detect.throughput_clock import StepClock
from stethoscope.records import GLOBAL_BATCH_SIZE, MFU, SAMPLES_PER_S, STEP_TIME, TFLOPS, TOKENS_PER_S

SERIES = (STEP_TIME, TOKENS_PER_S, SAMPLES_PER_S, TFLOPS, MFU)  # first present wins; rates are inverted


def time_like(s: dict[str, Any], alias: StepTimeAlias, clock: StepClock, values: dict[str, float],
              step: int) -> float | None:
    """This record's time per step (per sample, with a batch size logged), or the inverse of its rate;
    `s` is the detector's state: the series it settled on, the batch size, whether a clock gives the time."""
    name = s["series"]
    if name is None or alias.key is not None:
        name = next((n for n in SERIES if n in values), None)
        if name is None:
            v = alias.seconds(values)
            s["series"] = STEP_TIME if alias.key is not None else None
            if v is None and alias.key is None:
                v = clock.seconds(step, values.get(ELAPSED))
                s["by_clock"] = s.get("by_clock") or v is not None  # seconds a step
            return v if v is not None and v > 0 else None
        s["series"] = name
    v = values.get(name)
    if v is None or not math.isfinite(v) or v <= 0:
        return None
    if name != STEP_TIME:
        return 1.0 / v
    batch = values.get(GLOBAL_BATCH_SIZE)  # batch-size ramp-up: compare the time per sample
    if batch is not None and math.isfinite(batch) and batch > 0:
        s["batch"] = batch  # logs may give it only when it changes: it holds until the next one
    batch = s.get("batch")
    return v / batch if batch else v
