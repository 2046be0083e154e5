"""A loss that settles 10-20% higher for good after an off-schedule LR jump (the LR too high to learn at, not
high enough to blow up: gpt_runs lr_jump-s1/-s2) is that jump's divergence; without the jump in the log the
bar stays `divergence_rise_rel`."""

from __future__ import annotations

import random

from .conftest import make_records, of_type, replay_set, serious


def _run(jump: bool, log_lr: bool = True, settle: float = 1.16, seed: int = 0) -> list:
    rng = random.Random(seed)
    steps = list(range(1, 401))
    loss, lr = [], []
    for s in steps:
        if s < 150:
            level = 2.45 + 2.0 * (1 - s / 150) ** 3
        elif s < 160:
            level = 2.45 * 1.5
        else:
            level = 2.45 * settle
        loss.append(level * rng.uniform(0.95, 1.05))
        lr.append(1e-3 * (70 if jump and s >= 150 else 1))
    kw = {"LOSS": loss, "LR": lr} if log_lr else {"LOSS": loss}
    return replay_set(make_records(steps, **kw))


def test_a_loss_that_stays_16_percent_up_after_an_lr_jump_is_a_divergence_at_the_jump() -> None:
    found = of_type(serious(_run(jump=True)), "divergence")
    assert found and 145 <= found[0].step <= 165, found
    assert not found[0].evidence.get("withdrawn")


def test_without_the_jump_in_the_log_the_bar_stays_20_percent() -> None:
    assert of_type(serious(_run(jump=True, log_lr=False)), "divergence") == []
    assert of_type(serious(_run(jump=False)), "divergence") == []


def test_a_loss_that_comes_back_after_the_jump_is_no_divergence() -> None:
    assert of_type(serious(_run(jump=True, settle=1.02)), "divergence") == []
