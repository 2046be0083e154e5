"""Overfitting and weights that stopped changing: a rise the evals made only after the stop (the optimizer's
momentum running out past the eval's minimum, then the frozen value repeated) is not overfitting; a rise that
held before the stop stays overfitting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stethoscope.detect.overfit import OverfitDetector
from stethoscope.diagnose.engine import diagnose_run
from stethoscope.importers import read_any
from stethoscope.records import EVAL_LOSS, LOSS, StepRecord

ROOT = Path(__file__).resolve().parents[1] / "assets" / "real_trainers"
CASES = {c["case"]: c for c in json.loads((ROOT / "labels.json").read_text())}


@pytest.mark.parametrize("source", ["console", "file"])
def test_a_rise_made_in_the_stops_tail_is_no_overfitting(source: str) -> None:
    # Keras frozen-s2 (weights frozen at epoch 13): evals 0.8872 (best), 0.9028, 0.8909, 0.8941, then the
    # momentum's tail 0.921, 0.9223, and 0.9223 for ever: +4% above the best, all of it after the stop
    case = CASES[f"keras_fit-frozen-s2-{source}"]
    (d,) = [diagnose_run(run) for run in read_any(ROOT / case["file"])]
    assert [f for f in d.findings if f.type == "frozen_loss"]
    assert not [f for f in d.findings if f.type == "overfitting" and f.severity != "info"]


def _run(evals: list[float]) -> list:
    det, out = OverfitDetector(), []
    for i, e in enumerate(evals):
        for j in range(4):
            out += det.update(StepRecord(step=40 * i + 10 * j, values={LOSS: 1.5 - 0.01 * (4 * i + j)}))
        out += det.update(StepRecord(step=40 * i + 30, values={EVAL_LOSS: e}))
    return out + det.finish()


def test_a_rise_that_held_before_the_weights_stopped_stays_overfitting() -> None:
    evals = [1.3, 1.1, 0.95, 0.90, 0.93, 0.95, 0.97, 0.99, 1.0123456, 1.0123457, 1.0123457, 1.0123457]
    out = _run(evals)
    assert any(f.type == "frozen_loss" for f in out)
    over = [f for f in out if f.type == "overfitting"]
    assert over and over[-1].severity == "warning" and over[-1].step == 150
    assert not over[-1].evidence.get("withdrawn")
