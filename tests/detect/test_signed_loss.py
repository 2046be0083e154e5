"""A loss centred on 0 (a PPO/GRPO policy loss, a GAN objective) changes sign: ratios and levels mean nothing
there. A real PPO post-training log went `Loss: -0.0011` then `0.0003` and was an ERROR divergence ("loss
jumped at step 2"); the same moves on a loss above 0 are still judged."""

from __future__ import annotations

import random

from .conftest import make_records, of_type, replay_set, serious


def _ppo(seed: int, n: int = 120) -> list[float]:
    rng = random.Random(seed)
    return [-0.0011] + [round(rng.gauss(0.0002, 0.0008), 4) for _ in range(n - 1)]


def test_a_policy_loss_around_zero_raises_nothing_serious() -> None:
    for seed in range(5):
        loss = _ppo(seed)
        found = replay_set(make_records(list(range(1, len(loss) + 1)), LOSS=loss))
        assert not serious(found), (seed, [f.message for f in serious(found)])
        assert not of_type(found, "divergence") and not of_type(found, "loss_spike")


def test_a_loss_above_zero_that_rises_for_good_is_still_a_divergence() -> None:
    rng = random.Random(0)
    loss = [2.0 - 0.004 * i + rng.gauss(0, 0.01) for i in range(200)] + [2.2 + rng.gauss(0, 0.01) for _ in range(200)]
    found = replay_set(make_records(list(range(1, len(loss) + 1)), LOSS=loss))
    (d,) = of_type(found, "divergence")
    assert 195 <= d.step <= 205


def test_a_negative_loss_that_rises_for_good_is_still_a_divergence() -> None:
    # nnU-Net's Dice + CE loss falls below 0 (to about -0.85); a rise back to -0.3 undoes its learning
    rng = random.Random(1)
    loss = [-0.004 * i + rng.gauss(0, 0.01) for i in range(1, 201)] + [-0.3 + rng.gauss(0, 0.01) for _ in range(200)]
    found = replay_set(make_records(list(range(1, len(loss) + 1)), LOSS=loss))
    (d,) = of_type(found, "divergence")
    assert 195 <= d.step <= 205
