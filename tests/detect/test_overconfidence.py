"""The eval loss rises while the eval's accuracy or mAP keeps improving: overconfidence, not overfitting (info).
And an eval loss that repeats once and then moves on: one eval re-logged, not weights that stood still (info).

Both were warnings on a real YOLOv8 results.csv (val box/cls/dfl losses drifting up 3% over 100 epochs while
mAP50-95 improved to the last epoch; epochs 32 and 33 with the same three val losses to 6 digits)."""

from __future__ import annotations

import math
import random

from .conftest import make_records, of_type, replay_set


def _run(quality_keeps_improving: bool, seed: int = 0) -> list:
    rng = random.Random(seed)
    steps = list(range(1, 101))
    train = [2.0 * math.exp(-s / 30) + 0.5 + rng.gauss(0, 0.005) for s in steps]
    evals = [1.5 + 0.3 * math.exp(-s / 5) + 0.004 * max(0, s - 10) + rng.gauss(0, 0.003) for s in steps]
    if quality_keeps_improving:
        m = [0.6 - 0.3 * math.exp(-s / 40) + rng.gauss(0, 0.002) for s in steps]
    else:
        m = [0.5 - 0.2 * math.exp(-s / 4) - 0.001 * max(0, s - 10) + rng.gauss(0, 0.002) for s in steps]
    records = make_records(steps, LOSS=train, EVAL_LOSS=evals)
    for r, v in zip(records, m):
        r.values["metrics/mAP50-95(B)"] = v
    return records


def test_an_eval_loss_rise_with_the_map_still_improving_is_info() -> None:
    (f,) = of_type(replay_set(_run(True)), "overfitting")
    assert f.severity == "info" and f.evidence["improving"] == "metrics/mAP50-95(B)", f.message
    assert "overconfident" in f.message


def test_an_eval_loss_rise_with_the_map_falling_is_a_warning() -> None:
    (f,) = of_type(replay_set(_run(False)), "overfitting")
    assert f.severity == "warning", f.message


def test_one_repeated_eval_then_moving_on_is_info() -> None:
    rng = random.Random(3)
    steps = list(range(1, 61))
    evals = [round(2.0 * math.exp(-s / 20) + 1.0 + rng.gauss(0, 0.01), 6) for s in steps]
    evals[32] = evals[31]  # the same eval, logged twice
    train = [2.2 * math.exp(-s / 20) + 0.8 + rng.gauss(0, 0.01) for s in steps]
    frozen = of_type(replay_set(make_records(steps, LOSS=train, EVAL_LOSS=evals)), "frozen_loss")
    assert frozen and frozen[-1].severity == "info" and frozen[-1].evidence.get("moved_again") == 34


def test_evals_that_stay_frozen_stay_a_warning() -> None:
    rng = random.Random(3)
    steps = list(range(1, 61))
    evals = [round(2.0 * math.exp(-s / 20) + 1.0 + rng.gauss(0, 0.01), 6) for s in steps]
    evals[32:] = [evals[31]] * (60 - 32)
    train = [2.2 * math.exp(-s / 20) + 0.8 + rng.gauss(0, 0.01) for s in steps]
    frozen = of_type(replay_set(make_records(steps, LOSS=train, EVAL_LOSS=evals)), "frozen_loss")
    assert frozen and max(f.severity for f in frozen) == "warning"
