"""A loss that repeats one printed value is frozen only when the repeat is no coincidence of the print: how many
records in a row that takes depends on the print's resolution against the loss's noise (`frozen.repeats_needed`)."""

from __future__ import annotations

import random

from stethoscope.detect.frozen import decimals, repeats_needed
from stethoscope.detect.registry import DetectorSet
from stethoscope.records import LOSS, StepRecord


def _frozen(losses: list[float]) -> list:
    ds, out = DetectorSet(), []
    for i, v in enumerate(losses, 1):
        out += ds.update(StepRecord(step=i, values={LOSS: v}))
    return [f for f in out + ds.finish() if f.type == "frozen_loss"]


def _noisy(n: int, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    return [round(0.84 + rng.gauss(0, 0.02), 3) for _ in range(n)]  # printed with 3 decimals, noise 0.02


def test_three_equal_prints_of_a_noisy_3_decimal_loss_are_chance() -> None:
    losses = _noisy(600)
    losses[300:303] = [0.834] * 3  # three in a row by chance (the ESPnet-shaped log had them)
    assert _frozen(losses) == []
    assert repeats_needed(0.834, 0.02, 1000, 3) == 4


def test_a_3_decimal_loss_that_really_stopped_is_still_frozen() -> None:
    losses = _noisy(300) + [0.834] * 30
    (f,) = {f.step: f for f in _frozen(losses)}.values()
    assert f.step == 301


def test_a_full_precision_repeat_needs_only_the_minimum_and_a_print_as_coarse_as_the_noise_never() -> None:
    assert repeats_needed(0.6370072288513184, 0.02, 1000, 3) == 3
    assert repeats_needed(0.8, 0.001, 1000, 3) > 50
    assert decimals(0.834) == 3 and decimals(1e-05) == 5 and decimals(2.0) == 1
