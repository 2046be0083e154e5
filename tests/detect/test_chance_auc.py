"""A whole run at chance seen on a binary classifier's ROC AUC (`detect.chance`): 0.5 at every eval is a coin
toss whatever the classes' balance, so it needs no K; an accuracy at 1/K with no loss logged is `info` only.
A wild Keras run (CSVLogger: auc/val_auc 0.48-0.51 over 20 epochs, loss 0.693) had only a loss verdict."""

from __future__ import annotations

import json
import random
from pathlib import Path

from stethoscope.detect.chance import ChanceLevelDetector
from stethoscope.diagnose.engine import diagnose_run
from stethoscope.findings.catalogue import UNDERFITTING
from stethoscope.importers import read_any
from stethoscope.records import LOSS, StepRecord


def _keras_csv(path: Path, val_auc) -> Path:
    rnd = random.Random(2)
    rows = ["epoch,auc,loss,val_auc,val_loss"]
    for e in range(20):
        rows.append(f"{e},{0.5 + rnd.gauss(0, 0.006):.6f},{0.6931 + rnd.gauss(0, 0.0008):.6f},"
                    f"{val_auc(e) + rnd.gauss(0, 0.008):.6f},{0.6932 + rnd.gauss(0, 0.0005):.6f}")
    path.write_text("\n".join(rows) + "\n")
    return path


def _chance(path: Path) -> list:
    (run,) = read_any(path)
    return [f for f in diagnose_run(run).findings if f.type == UNDERFITTING and f.source == "chance"]


def test_a_binary_classifier_at_auc_one_half_all_run_is_not_learning(tmp_path: Path) -> None:
    (f,) = _chance(_keras_csv(tmp_path / "training.csv", lambda e: 0.5))
    assert f.severity == "warning" and f.evidence["chance_auc"] == 0.5 and f.evidence["evals"] == 20
    assert "ROC AUC" in f.message and "coin" in f.message


def test_an_auc_that_rises_off_one_half_is_not_at_chance(tmp_path: Path) -> None:
    assert _chance(_keras_csv(tmp_path / "training.csv", lambda e: min(0.85, 0.5 + 0.03 * e))) == []


def test_a_weak_model_steadily_above_chance_is_not_flagged() -> None:
    det = ChanceLevelDetector()
    for i in range(10):
        det.update(StepRecord(100 * (i + 1), {LOSS: 0.68, "val/auc": 0.58 + 0.002 * (i % 3)}))
    assert det.finish() == []


def test_accuracy_at_one_over_k_without_any_loss_is_info() -> None:
    det = ChanceLevelDetector()
    for i in range(8):
        det.update(StepRecord(100 * (i + 1), {"eval/accuracy": 0.1 + 0.001 * (i % 2)}))
    (f,) = det.finish()
    assert f.severity == "info" and f.evidence["classes"] == 10
    restored = ChanceLevelDetector()
    restored.load_state_dict(json.loads(json.dumps(det.state_dict())))
    assert [x.severity for x in restored.finish()] == ["info"]
