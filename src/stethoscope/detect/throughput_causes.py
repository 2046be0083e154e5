"""What a slow record says its step spent the time on beyond the model: an eval, a GC pause, a data wait.

An eval logged at step N sits in the time of the record that carries it (nanoGPT, a W&B history: the
eval runs at the top of the iteration it is logged with) or in the next record's (the HF Trainer logs
the eval after step N's time was taken). The next record is blamed on the eval only when the eval's own
record was not slow: a data-loader stall right after an eval is the loader's, not the eval's.
A time per step that is a smoothed average (tqdm's `s/it`) spreads the eval's seconds over the records after it
(110 s/it at the step after an HF eval, then 84, 65, 52 ... back to 21): a slow record within `SHADOW` of the
eval cadence after an eval falls at the cadence the run chose, and is the eval's too.
A record at an epoch's start (the epoch counter's whole part rose at it or at the record before) holds the
work a training loop does at that boundary: the data loader's restart (its workers and first batches), an
eval or a checkpoint at the epoch's end, or a time that is a running average restarting with the epoch
(HRNet's `Time: 4.11` at `Iter:[0/495]`, 0.66 ten iterations later).
Used by `detect.throughput`.
"""

from __future__ import annotations

import math
from typing import Any

from stethoscope.records import DATA_WAIT, GC_PAUSE, STEP_TIME

EVAL = "eval"
EPOCH = "epoch"
EVAL_RUNTIME = "eval/runtime_s"
_EPOCH_SERIES = ("train/epoch", "epoch")
SHADOW = 0.1  # of the steps between evals: a slow record this close after an eval is in its smoothed tail


def slow_causes(s: dict[str, Any], values: dict[str, float], prev_step: int | None,
                excess_s: float | None) -> list[str]:
    """`s`: the detector's state (`eval_step`, `eval_slow`); `excess_s`: the step time above the level, in
    seconds, when the record logs a step time and a level is known."""
    why = [EPOCH] if epoch_start(s, values) else []
    eval_step = s.get("eval_step")
    if eval_step is not None and prev_step is not None and (eval_step >= prev_step or in_shadow(s, eval_step)):
        if eval_step > prev_step or not s.get("eval_slow"):
            why.append(EVAL)
    if excess_s is not None and excess_s > 0:
        for name, key in ((GC_PAUSE, "gc"), (DATA_WAIT, "data")):
            v = values.get(name)
            if v is not None and math.isfinite(v) and v >= 0.5 * excess_s:
                why.append(key)
    return why


def in_shadow(s: dict[str, Any], eval_step: int) -> bool:
    """Is this record (`s["last_step"]`) within `SHADOW` of the eval cadence after the last eval? The cadence is the
    latest gap between two evals (`s["eval_gap"]`, kept here); none is known before the second eval."""
    if s.get("eval_seen") != eval_step:
        if s.get("eval_seen") is not None:
            s["eval_gap"] = eval_step - s["eval_seen"]
        s["eval_seen"] = eval_step
    gap, step = s.get("eval_gap"), s.get("last_step")
    return bool(gap) and step is not None and 0 < step - eval_step <= SHADOW * gap


def epoch_start(s: dict[str, Any], values: dict[str, float]) -> bool:
    """Is this record the first or second of a new epoch: did the epoch counter's whole part rise at it or at the
    record before? (`s["epoch_whole"]`: the last whole epoch seen; `s["epoch_next"]`: the record before turned it.)"""
    was = bool(s.pop("epoch_next", False))
    e = next((values[k] for k in _EPOCH_SERIES if k in values), None)
    if e is None or not math.isfinite(e):
        return was
    whole, prev = math.floor(e + 1e-9), s.get("epoch_whole")
    s["epoch_whole"] = whole
    if prev is not None and whole > prev:
        s["epoch_next"] = True
        return True
    return was


def eval_seconds(drop: dict[str, Any] | None, values: dict[str, float]) -> None:
    """Add an eval's own logged time (`eval/runtime_s`, the HF Trainer's) to the open slowdown it falls in."""
    v = values.get(EVAL_RUNTIME)
    if drop is not None and v is not None and math.isfinite(v) and v > 0:
        drop["eval_s"] = drop.get("eval_s", 0.0) + v


def step_time_excess(values: dict[str, float], level_s: float) -> float | None:
    v = values.get(STEP_TIME)
    return None if v is None else v - level_s
