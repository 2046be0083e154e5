"""A loss rise under an LR jump that is held (`detect.lr_held`, used by `detect.spike`): a divergence, which one
low value of a noisy per-step loss no longer "recovers". A tiny GPT whose LR was set to x60 and left there
(2.44 -> 4.69, then ~3.0 for a hundred steps) was a loss spike "recovered after 18 steps"."""

from __future__ import annotations

import random

from stethoscope.findings.catalogue import DIVERGENCE
from stethoscope.records import LOSS, LR, StepRecord

from .conftest import replay_set


def _run(lr_at, extra_at, n: int = 360, noise: float = 0.15, seed: int = 3) -> list[StepRecord]:
    rnd = random.Random(seed)
    out = []
    for s in range(1, n + 1):
        base = 2.4 + 2.0 * 0.97 ** s  # a descending curve, flat near 2.4 by step 150
        out.append(StepRecord(s, {LOSS: base + extra_at(s) + rnd.gauss(0, noise), LR: lr_at(s)}))
    return out


def _divergences(records: list[StepRecord]) -> list:
    return [f for f in replay_set(records) if f.type == DIVERGENCE and f.severity in ("warning", "error")]


def test_a_held_lr_jump_whose_loss_hovers_above_its_level_is_a_divergence() -> None:
    def extra(s: int) -> float:  # the leap, then +0.5 (3 sigmas of its noise: single values dip to the old level)
        return 0.0 if s < 210 else (2.0 if s < 212 else 0.5)
    found = _divergences(_run(lambda s: 3e-3 if s < 210 else 0.18, extra))
    assert found and abs(found[0].step - 210) <= 3, [(f.step, f.message[:80]) for f in found]
    assert any("stayed there" in c for c in found[0].causes)


def test_an_lr_spike_that_comes_straight_back_is_no_divergence() -> None:
    def extra(s: int) -> float:
        return 2.0 if 210 <= s < 212 else 0.0
    assert _divergences(_run(lambda s: 0.18 if 210 <= s < 212 else 3e-3, extra)) == []


def test_a_held_jump_whose_loss_is_back_at_once_is_no_divergence() -> None:
    def extra(s: int) -> float:
        return 2.0 if 210 <= s < 212 else 0.0  # the model shook it off: the level is back two records later
    assert _divergences(_run(lambda s: 3e-3 if s < 210 else 0.18, extra)) == []
