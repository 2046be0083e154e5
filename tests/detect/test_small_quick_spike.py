"""A small spike that was back within a few records costs the run little (`detect.spike_incident.small_and_young`).

wild-logs-5 F4: a PaiNN run's epoch loss went 0.0326 -> 0.0445 (x1.37, 7.45 sigma of a smooth epoch average) at
epoch 39 of 650 and was back by epoch 44: a WARNING loss_spike. It stayed under x1.5 its level and gave back 8% of
what the run had learned (0.17 -> 0.033): a few epochs at a slightly higher loss, nothing to act on: info. An LR
spike that gives back most of what a young run learned (a tiny GPT, x1.45, 69% of its fall) stays a warning, and
so does a garbage batch's x3 jump (detect-8 measured that a count-only rule would lose 7 synthetic warnings).
"""

from __future__ import annotations

import math
import random

from .conftest import make_records, of_type, replay_set


def _run(first: float, level: float, bump: list[float], n: int = 120, at: int = 39, sd: float = 0.0008,
         seed: int = 0) -> list:
    """An epoch loss: `first` at epoch 1 (the first epoch's average), then a fast fall to `level`, and a bump."""
    rng = random.Random(seed)
    loss = [first]
    for e in range(1, n):
        base = level * (1 + 0.8 * math.exp(-e / 8)) + rng.gauss(0, sd)
        if at <= e < at + len(bump):
            base = level * bump[e - at]
        loss.append(base)
    return of_type(replay_set(make_records(range(1, n + 1), LOSS=loss)), "loss_spike")


def test_a_small_bump_back_within_five_epochs_is_info() -> None:
    found = _run(0.17, 0.0326, [1.45, 1.4, 1.35, 1.3])
    spikes = [f for f in found if f.step == 40]
    assert spikes and all(f.severity == "info" for f in spikes), [(f.step, f.severity, f.message) for f in found]


def test_a_bump_that_gives_back_most_of_what_the_run_learned_stays_a_warning() -> None:
    found = _run(3.4, 2.54, [1.45, 1.42, 1.4, 1.35], sd=0.03)  # x1.45 of 2.54 against a fall of 0.86: more than all
    assert [f.severity for f in found if f.step == 40] == ["warning"], [(f.step, f.severity) for f in found]


def test_a_garbage_batch_jump_stays_a_warning() -> None:
    found = _run(0.17, 0.0326, [3.0, 2.0, 1.2])
    assert [f.severity for f in found if f.step == 40] == ["warning"], [(f.step, f.severity) for f in found]
