"""A data loader that starts stalling every P steps in a run whose evals were its only slow steps so far
(`detect.stall_patterns.beat_start`): its rhythm is new, dated at its first stall, even when the evals (every 40
steps) fall on the loader's grid by chance, and a loader stall that lands on an eval's step (counted as the
eval's) is still one of its beats (tiny-GPT stall runs: the stall pattern was dated at the first eval, step 40,
137 steps before the loader's first stall)."""

from __future__ import annotations

import random

import torch

from stethoscope.detect.throughput import ThroughputDetector

from .conftest import make_records, of_type, replay

torch.set_num_threads(1)


def _run(onset: int, every: int, n: int = 360, eval_every: int = 40, seed: int = 0) -> list:
    r = random.Random(seed)
    times = [0.022 + r.uniform(0.0, 0.008) for _ in range(n)]  # a busy CPU's jitter
    evals: list[float | None] = [None] * n
    for s in range(eval_every, n, eval_every):
        evals[s] = 2.5
        times[s] += 0.1  # the eval runs at the top of the iteration it is logged with
    for s in range(onset, n, every):
        times[s] += 0.15  # the loader's stall
    return of_type(replay(ThroughputDetector(), make_records(range(n), STEP_TIME=times, EVAL_LOSS=evals)),
                   "periodic_stall")


def test_a_loader_rhythm_after_evals_on_its_grid_is_dated_at_its_first_stall() -> None:
    # evals at 40, 80, 120, 160 all fall on the grid 177 + 8k (40 = 5 x 8, 177 - 160 = 17 = 2 x 8 + 1)
    found = _run(onset=177, every=8)
    assert 177 in [f.step for f in found], [(f.step, f.message) for f in found]


def test_a_loader_stall_on_an_eval_step_is_still_a_beat() -> None:
    # every 5 steps from 150: the stall at 160 lands on an eval and is counted as the eval's
    found = _run(onset=150, every=5)
    assert 150 in [f.step for f in found], [(f.step, f.message) for f in found]


def test_evals_alone_are_one_pattern() -> None:
    found = _run(onset=10**6, every=8)
    assert [f.step for f in found] == [40], [(f.step, f.message) for f in found]
