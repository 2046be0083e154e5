"""A second run appended to the same log starts its steps over: its first losses are that run's start, not a spike
against the first run's end, whether or not the log carries an LR. Two real logs (NoProp's epochs 1..225 then a
new run from epoch 1 at a loss of 4042; minGPT's `iter 300` then `iter 0` of a new run) were a WARNING loss spike and
an ERROR divergence: the restart was known only from an LR column, which they do not print."""

from __future__ import annotations

import math
import random

from .conftest import make_records, of_type, replay_set, serious


def _two_runs(second_start: float, seed: int = 0) -> list:
    rng = random.Random(seed)
    steps = list(range(1, 226)) + list(range(1, 201))
    loss = [4.0 * math.exp(-s / 30) + 0.07 + rng.gauss(0, 0.002) for s in range(1, 226)]
    loss += [second_start * math.exp(-s / 20) + 0.5 + rng.gauss(0, 0.01) for s in range(1, 201)]
    return make_records(steps, LOSS=loss)


def test_a_second_run_from_step_one_is_no_spike_or_divergence() -> None:
    found = serious(replay_set(_two_runs(4000.0)))
    assert not of_type(found, "loss_spike", "divergence"), [f.message for f in found]


def test_the_same_jump_without_the_steps_starting_over_stays_a_finding() -> None:
    rng = random.Random(0)
    steps = list(range(1, 426))
    loss = [4.0 * math.exp(-s / 30) + 0.07 + rng.gauss(0, 0.002) for s in range(1, 226)]
    loss += [4000.0 * math.exp(-s / 20) + 0.5 + rng.gauss(0, 0.01) for s in range(1, 201)]
    found = serious(replay_set(make_records(steps, LOSS=loss)))
    assert of_type(found, "loss_spike", "divergence"), [f.message for f in found]
