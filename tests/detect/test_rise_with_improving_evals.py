"""A loss that rises while an eval metric of the model's quality keeps improving is the objective's rise, not a
divergence to act on (info, naming the metric). A real RTMDet log (mmdet 3.x) was an ERROR divergence: its
loss starts near 0 in the LR warm-up (few positives matched), climbs 0.07 -> 1.5 over 5 epochs and falls slowly
after, while its COCO mAP climbs 0.08 -> 0.79 over 200 epochs."""

from __future__ import annotations

import math
import random

from .conftest import make_records, of_type, replay_set

MAP = "eval/coco/bbox_mAP"


def _run(map_improves: bool, eval_before_rise: bool = False, seed: int = 0) -> list:
    rng = random.Random(seed)
    steps = list(range(1, 801))
    loss = []
    for s in steps:
        rise = 0.07 + 1.45 / (1 + math.exp(-(s - 50) / 8))  # the climb of the first epochs
        loss.append(rise * (0.3 + 0.7 * math.exp(-max(0, s - 100) / 300)) + rng.gauss(0, 0.01))
    records = make_records(steps, LOSS=loss)
    first = 10 if eval_before_rise else 100
    for r in records:
        if r.step >= first and r.step % 20 == 0:
            t = (r.step - first) / 700
            good = 0.08 + 0.71 * (1 - math.exp(-4 * t))
            r.values[MAP] = (good if map_improves else max(0.01, 0.3 - 0.25 * t)) + rng.gauss(0, 0.004)
    return records


def test_a_rise_while_the_map_keeps_climbing_is_info() -> None:
    found = of_type(replay_set(_run(True)), "divergence")
    assert found, "the rise itself is still reported"
    f = found[-1]
    assert f.severity == "info", f.message
    assert MAP in f.message and f.evidence["improving_metric"]["name"] == MAP


def test_the_same_rise_with_the_map_falling_stays_an_error() -> None:
    found = of_type(replay_set(_run(False)), "divergence")
    assert found and found[-1].severity == "error", [f.message for f in found]


def test_an_eval_before_the_rise_is_the_bar_the_metric_must_beat() -> None:
    # with an eval before the rise, the metric must end above every eval before it (0.08 at step 20 -> 0.79)
    found = of_type(replay_set(_run(True, eval_before_rise=True)), "divergence")
    assert found and found[-1].severity == "info", [f.message for f in found]
