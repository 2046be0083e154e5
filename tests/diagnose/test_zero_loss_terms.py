"""A train-loss term exactly 0 on every record while the total is not (`diagnose.degenerate.zero_terms`).

wild-logs-5 X1: a YOLOv8 results.csv had `train/box_loss` and `train/dfl_loss` at 0 in all 50 rows (no box ever
matched: the labels were not read) and `metrics/mAP50(B)` / `metrics/recall(B)` exactly 0 from epoch 15; only the
val-loss overfitting was reported. Terms at 0 from the first record plus quality metrics collapsed to exactly 0 is
degenerate training (warning); terms at 0 alone may be switched off on purpose (info).
"""

from __future__ import annotations

import random
from pathlib import Path

from stethoscope.diagnose.engine import diagnose_run
from stethoscope.importers.registry import read_any

_HEAD = ("epoch,time,train/box_loss,train/cls_loss,train/dfl_loss,metrics/precision(B),metrics/recall(B),"
         "metrics/mAP50(B),metrics/mAP50-95(B),val/box_loss,val/cls_loss,val/dfl_loss,lr/pg0,lr/pg1,lr/pg2")


def _results(path: Path, box: bool, collapse_at: int | None, n: int = 30) -> Path:
    rng = random.Random(0)
    rows = [_HEAD]
    for e in range(1, n + 1):
        cls = 100.0 * 0.8 ** e + 0.03
        b, d = (1.2 * 0.97 ** e, 1.1 * 0.98 ** e) if box else (0, 0)
        p, r, m = 0.002 + 0.0004 * e, 0.55 - 0.01 * e + rng.gauss(0, 0.01), 0.005 + 0.0002 * e
        if collapse_at is not None and e >= collapse_at:
            p = r = m = 0
        lr = 0.0015
        rows.append(f"{e},{143.2 * e:.3f},{b:.5g},{cls:.5g},{d:.5g},{p:.5g},{r:.5g},{m:.5g},{m / 5:.5g},"
                    f"{3.5 + rng.gauss(0, 0.01):.5g},{4.0 + rng.gauss(0, 0.05):.5g},{4.17:.5g},{lr},{lr},{lr}")
    path.write_text("\n".join(rows) + "\n")
    return path


def _zero_terms(path: Path) -> list:
    (run,) = read_any(path)
    return [f for f in diagnose_run(run).findings if f.evidence.get("zero_terms")]


def test_terms_at_0_and_metrics_collapsed_to_0_are_degenerate_training(tmp_path: Path) -> None:
    (f,) = _zero_terms(_results(tmp_path / "results.csv", box=False, collapse_at=15))
    assert f.severity == "warning" and f.evidence["zero_terms"] == ["train/box_loss", "train/dfl_loss"], f
    assert f.evidence["collapsed_metrics"]["metrics/recall(B)"] == 15 and "degenerate" in f.message


def test_terms_at_0_with_metrics_alive_are_info(tmp_path: Path) -> None:
    (f,) = _zero_terms(_results(tmp_path / "results.csv", box=False, collapse_at=None))
    assert f.severity == "info", f


def test_terms_that_train_say_nothing(tmp_path: Path) -> None:
    assert _zero_terms(_results(tmp_path / "results.csv", box=True, collapse_at=15)) == []
