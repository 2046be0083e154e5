"""A divergence undoes a real share of what the run had learned (`divergence_learned_share`).

A real Keras fit (tests/assets/json_metrics/make_keras_history.py) memorised its 96 samples to a loss of
0.0007 (from 1.99) and Adam then wobbled it up to 0.064 and back to 0.006: 3% of the fall, no divergence
(it was reported as an ERROR). The same shape scaled so the rise undoes half the fall still is one."""

from __future__ import annotations

import json
from pathlib import Path

from stethoscope.detect.trend import TrendDetector

from .conftest import make_records, of_type, replay, replay_set

HISTORY = Path(__file__).parent.parent / "assets" / "json_metrics" / "keras_history.json"


def _keras_loss() -> list[float]:
    return json.loads(HISTORY.read_text())["loss"]


def test_a_wobble_off_a_memorised_floor_is_no_divergence() -> None:
    loss = _keras_loss()
    found = replay_set(make_records(list(range(len(loss))), LOSS=loss))
    assert not of_type(found, "divergence"), [f.message for f in of_type(found, "divergence")]


def test_the_same_rise_is_a_divergence_when_it_undoes_half_the_learning() -> None:
    loss = _keras_loss()
    floor = min(loss)
    # the climb from the floor (epochs 30-42) made ten times taller: 0.64, a third of the 1.99 -> 0.0007 fall
    lifted = [v if s < 30 else floor + 10 * (v - floor) for s, v in enumerate(loss)]
    (d,) = of_type(replay(TrendDetector(), make_records(list(range(len(lifted))), LOSS=lifted)), "divergence")
    assert 29 <= d.step <= 34 and d.severity == "error"


def test_a_run_that_learned_nothing_has_no_share_to_lose() -> None:
    steps = list(range(0, 400, 10))
    loss = [2.0 + 0.001 * (s % 30) for s in steps[:20]] + [2.0 + 0.15 * i for i in range(20)]
    assert of_type(replay(TrendDetector(), make_records(steps, LOSS=loss)), "divergence")
