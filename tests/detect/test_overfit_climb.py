"""Overfitting on sparse evals after a steep descent: the eval noise is measured free of the curve's trend
(second differences), the level the best left is set by the evals that competed with it, and a steady climb
(each of the last evals above the one before, ending clear of that level) is a warning."""

from __future__ import annotations

import json
import math
from pathlib import Path

from stethoscope.detect.overfit import OverfitDetector, _eval_noise
from stethoscope.records import EVAL_LOSS, LOSS, StepRecord

ROOT = Path(__file__).resolve().parents[1] / "assets" / "real_trainers"


def _run(evals: dict[int, float], train: dict[int, float]) -> list:
    det, out = OverfitDetector(), []
    for step in sorted(set(evals) | set(train)):
        values = {}
        if step in train:
            values[LOSS] = train[step]
        if step in evals:
            values[EVAL_LOSS] = evals[step]
        out += det.update(StepRecord(step=step, values=values))
    return [f for f in out + det.finish() if f.type == "overfitting"]


def test_a_steady_climb_after_a_steep_descent_is_overfitting() -> None:
    # evals every 100 steps: 2.82 -> 1.247 at 500, then up on every eval to 1.766 (+42%) while the train loss falls
    evals = {100: 2.8217, 200: 2.1049, 300: 1.6706, 400: 1.4052, 500: 1.2473, 600: 1.2943, 700: 1.3889,
             800: 1.5106, 900: 1.6331, 1000: 1.7658}
    train = {s: 3 * math.exp(-s / 200) + 0.6 for s in range(10, 1001, 10)}
    found = _run(evals, train)
    assert found and found[-1].severity == "warning" and found[-1].step == 500
    assert found[-1].evidence["evals_since_best"] == 5
    # first differences of those evals are mostly the descent; second differences are not
    assert _eval_noise(list(evals.values())) < _first_diff_sigma(list(evals.values()))


def _first_diff_sigma(values: list[float]) -> float:
    from stethoscope.detect.stats import diff_sigma

    return diff_sigma(values, tails=False)


def test_a_short_rise_into_frozen_evals_is_no_overfitting_warning() -> None:
    # Keras, weights frozen at epoch 13: the evals crept up 0.8975 -> 0.9053 over four epochs, then repeated
    rows = {r["case"]: r for r in json.loads((ROOT / "labels.json").read_text())}
    r = rows["keras_fit-frozen-s1-file"]
    found = _run(dict(r["logged_eval"]), dict(r["logged_loss"]))
    assert not [f for f in found if f.severity != "info"]


def test_repeated_evals_tell_no_noise() -> None:
    assert _eval_noise([1.0, 0.9, 0.85, 0.86, 0.84] + [0.9] * 20) > 0.001
