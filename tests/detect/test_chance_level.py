"""A classifier that never left chance level (`detect.chance`): eval accuracy 1/K at every eval and the loss at
ln(K) from the first record to the last. A LoRA RoBERTa run on AG News (wild-logs-3 X1, HF TensorBoard events:
train loss 1.397 -> 1.395, ln 4 = 1.386; eval accuracy 0.2407-0.2408 at all 12 evals) was called healthy."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from stethoscope.detect.chance import ChanceLevelDetector
from stethoscope.diagnose.engine import diagnose_run
from stethoscope.findings.catalogue import UNDERFITTING
from stethoscope.importers import read_any
from stethoscope.records import EVAL_LOSS, LOSS, StepRecord

# the real run's numbers, step 100..1200 every 100
LORA_LOSS = [1.3972, 1.3924, 1.3943, 1.3956, 1.3922, 1.3984, 1.3904, 1.3961, 1.3951, 1.3959, 1.3949, 1.3943]
LORA_ACC = [0.2407, 0.2407, 0.2407, 0.2408, 0.2408, 0.2407, 0.2408, 0.2408, 0.2407, 0.2407, 0.2407, 0.2407]


def _csv(tmp_path: Path, loss: list[float], acc: list[float], every: int = 100) -> Path:
    path = tmp_path / "run.csv"
    rows = ["step,loss,eval_accuracy"] + [f"{every * (i + 1)},{x},{a}" for i, (x, a) in enumerate(zip(loss, acc))]
    path.write_text("\n".join(rows) + "\n")
    return path


def _diagnose(path: Path) -> list:
    (run,) = read_any(path)
    return [f for f in diagnose_run(run).findings if f.severity != "info" or f.type == "healthy"]


def test_a_lora_run_flat_at_chance_is_not_learning_not_healthy(tmp_path: Path) -> None:
    found = _diagnose(_csv(tmp_path, LORA_LOSS, LORA_ACC))
    assert [(f.type, f.severity, f.step, f.end_step) for f in found] == [(UNDERFITTING, "warning", 100, 1200)]
    f = found[0]
    assert "chance level" in f.message and "1/4" in f.message and "ln(4)" in f.message
    assert f.evidence["classes"] == 4 and math.isclose(f.evidence["chance_loss"], math.log(4))
    assert any("LoRA" in c for c in f.causes) and len(f.causes) == len(f.fixes)


def test_the_same_run_once_it_learns_is_healthy(tmp_path: Path) -> None:
    # the sister run (LR 5e-5): 1.29 -> 0.24, accuracy 0.875 -> 0.914
    loss = [1.2893, 0.4233, 0.324, 0.3172, 0.3096, 0.2782, 0.3015, 0.2902, 0.2773, 0.2857, 0.2633, 0.2362]
    acc = [0.875, 0.8981, 0.8935, 0.9074, 0.909, 0.9043, 0.912, 0.9136, 0.9136, 0.9105, 0.9105, 0.9136]
    assert [f.type for f in _diagnose(_csv(tmp_path, loss, acc))] == ["healthy"]


def test_a_run_at_chance_for_its_warm_up_that_then_learns_is_not_flagged() -> None:
    det = ChanceLevelDetector()
    for i in range(12):
        late = i >= 6  # at chance for half the run, then it learns: a plateau at the start that ended
        det.update(StepRecord(100 * (i + 1), {LOSS: 0.9 if late else 1.39, "eval/accuracy": 0.6 if late else 0.25}))
    assert det.finish() == []


@pytest.mark.parametrize(("loss", "acc"), [
    ([1.39, 1.2, 1.0, 0.9, 0.85, 0.84], [0.25] * 6),  # accuracy at 1/K but the loss fell: it learned the scores
    ([1.39] * 6, [0.25, 0.25, 0.31, 0.25, 0.25, 0.25]),  # one eval off 1/K: not a constant guess
    ([0.9] * 6, [0.25] * 6),  # a plateau after learning (far under ln 4)
    ([2.3] * 6, [0.5] * 6),  # accuracy 1/2 but a loss of ln 10: no one K explains both
])
def test_runs_that_are_not_at_chance_on_both_signs_are_not_flagged(loss: list[float], acc: list[float]) -> None:
    det = ChanceLevelDetector()
    for i, (x, a) in enumerate(zip(loss, acc)):
        det.update(StepRecord(10 * (i + 1), {LOSS: x, "val/acc": a}))
    assert det.finish() == []


def test_accuracy_in_percent_and_the_eval_loss_when_no_train_loss_is_logged() -> None:
    det = ChanceLevelDetector()
    for i in range(5):
        det.update(StepRecord(i + 1, {EVAL_LOSS: 2.30 + 0.002 * (i % 2), "val/top1": 10.1 - 0.1 * (i % 2)}))
    (f,) = det.finish()
    assert f.evidence["classes"] == 10 and f.severity == "warning"
    restored = ChanceLevelDetector()
    restored.load_state_dict(json.loads(json.dumps(det.state_dict())))
    assert [g.message for g in restored.finish()] == [f.message]
