"""A log that ends fewer than `overfit_patience` evals after its best eval, the last one clearly above it while
the train loss fell: too few evals to call it overfitting (no warning), but said at info, naming the best
checkpoint (the last one is not it)."""

from __future__ import annotations

import json
from pathlib import Path

from stethoscope.detect.overfit import OverfitDetector
from stethoscope.diagnose.engine import diagnose_run
from stethoscope.importers import read_any
from stethoscope.records import EVAL_LOSS, LOSS, StepRecord

ROOT = Path(__file__).resolve().parents[1] / "assets" / "real_trainers"
CASES = {c["case"]: c for c in json.loads((ROOT / "labels.json").read_text())}


def _run(evals: list[float]) -> list:
    det, out = OverfitDetector(), []
    for i, e in enumerate(evals):
        for j in range(4):  # a falling train loss between evals
            out += det.update(StepRecord(step=40 * i + 10 * j, values={LOSS: 1.5 - 0.01 * (4 * i + j)}))
        out += det.update(StepRecord(step=40 * i + 30, values={EVAL_LOSS: e}))
    return [f for f in out + det.finish() if f.type == "overfitting"]


def test_a_rise_on_the_last_eval_after_the_best_is_an_info_naming_the_best_checkpoint() -> None:
    found = _run([1.3, 1.1, 0.98, 0.93, 0.912, 0.918, 0.906, 0.933])
    assert [(f.severity, f.step) for f in found] == [("info", 270)]
    assert "too few" in found[0].message and "checkpoint of step 270" in found[0].message


def test_a_last_eval_within_the_noise_of_the_best_is_not_reported() -> None:
    assert _run([1.3, 1.1, 0.98, 0.93, 0.912, 0.918, 0.906, 0.9065]) == []


def test_a_real_mmengine_run_whose_last_eval_rose_names_its_best_step() -> None:
    # mmengine healthy-s5: the evals behind the printed running means end 0.9111, 0.9184, 0.9061, 0.9326
    for source in ("file", "console"):
        case = CASES[f"mmengine_runner-healthy-s5-{source}"]
        (label,) = [lb["step"] for lb in case["labels"] if lb["type"] == "overfitting"]
        (run,) = read_any(ROOT / case["file"])
        found = [f for f in diagnose_run(run).findings if f.type == "overfitting"]
        assert [(f.severity, f.step) for f in found] == [("info", label)], found
