"""A slowdown's onset is fitted without an eval's (or a loader restart's) time at the end of its streak
(`detect.throughput_onset.streak_evals`): the slow records that opened it may end with the records that hold the
data loader's restart after an eval (mmengine: `time` and `data_time` are running means over 10 iterations, so
one 2 s restart shows in two records), and no record after them yet shows them a stall on top. Fitted as the new
level, they dated a ramp that began at step 144 at step 158."""

from __future__ import annotations

import random

import pytest
import torch

from stethoscope.detect.config import DetectConfig
from stethoscope.detect.throughput import ThroughputDetector
from stethoscope.records import DATA_WAIT, EVAL_LOSS, STEP_TIME, StepRecord

torch.set_num_threads(1)

_W, _EVERY, _EVAL = 10, 4, 32


def _records(onset: int, n: int = 256, seed: int = 0) -> list[StepRecord]:
    r = random.Random(seed)
    step_s, wait_s = [0.0], [0.0]  # per iteration, from iteration 1
    for i in range(1, n + 1):
        wait = 2.0 if i > _EVAL and (i - 1) % _EVAL == 0 else 0.0005  # the loader restarts after each eval
        step_s.append(0.0025 + r.uniform(-0.0004, 0.0004) + wait + (0.0006 * (i - onset) if i > onset else 0.0))
        wait_s.append(wait)
    out = []
    for x in range(_EVERY, n + 1, _EVERY):
        lo = max(1, x - _W + 1)
        values = {STEP_TIME: sum(step_s[lo: x + 1]) / (x + 1 - lo), DATA_WAIT: sum(wait_s[lo: x + 1]) / (x + 1 - lo)}
        if x % _EVAL == 0:
            values[EVAL_LOSS] = 1.0
        out.append(StepRecord(x, values))
    return out


@pytest.mark.parametrize("seed", [3, 4])  # jitter under which the streak opens on the restart's records
def test_a_ramp_is_dated_where_it_began_not_at_the_loader_restart_that_ends_its_streak(seed: int) -> None:
    det = ThroughputDetector(DetectConfig(step_time_window=_W))
    found = []
    for rec in _records(onset=144, seed=seed):
        found += det.update(rec)
    found += det.finish()
    drops = [f for f in found if f.type == "throughput_drop" and f.step is not None and f.step > 100]
    assert drops and abs(drops[0].step - 144) <= 2 * _EVERY, [(f.step, f.message[:90]) for f in drops]
