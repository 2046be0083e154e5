"""A warm-up's fast first drop is where the run opened (`diagnose.curves._opened`).

LLaMA-Factory continued pre-training (wild-logs-4): 2.35 -> 2.05 in its first 12 of 435 records (the warm-up),
then a steady 2.05 -> 1.97. The first blocks' median took the level after the drop, so the curve read "the loss
never improved (2.084 -> 1.97, 5.7%)" and the run got a WARNING underfitting "not learning". Progress is measured
from where the run opened (the median of its first records) as well; a run flat from its first record, or with
one odd first record, still never came down."""

from __future__ import annotations

import random

from stethoscope.diagnose.curves import classify_train

_WARMUP = [2.3475, 2.2964, 2.2553, 2.2243, 2.1923, 2.1781, 2.1571, 2.1371, 2.1192, 2.0939, 2.0738, 2.0624]


def _curve(opening: list[float], level: float, end: float, n: int = 435, sd: float = 0.004) -> tuple[list, list]:
    rng = random.Random(0)
    rest = [level + (end - level) * (i / (n - len(opening))) ** 0.5 + rng.gauss(0, sd) for i in range(n - len(opening))]
    v = opening + rest
    return [5 * (i + 1) for i in range(len(v))], v


def test_a_warm_up_drop_then_a_slow_descent_is_learning() -> None:
    s, v = _curve(_WARMUP, 2.05, 1.97)
    c = classify_train(s, v)
    assert c.label != "plateau_high", (c.label, c.detail)


def test_a_run_flat_from_its_first_record_never_came_down() -> None:
    s, v = _curve([0.6995, 0.6990, 0.6985], 0.6937, 0.6873)  # a binary classifier at ln 2
    assert classify_train(s, v).label == "plateau_high"


def test_one_odd_first_record_is_not_where_the_run_opened() -> None:
    s, v = _curve([5.0, 2.06, 2.05], 2.05, 2.03)
    assert classify_train(s, v).label == "plateau_high"
