"""Slow steps at each epoch's start (`detect.throughput_causes.epoch_start`, `throughput_findings.is_schedule_time`),
and a slow real descent that is no plateau (`detect.trend.TrendDetector.finish`).

wild-logs-5 F3: an HRNet-style segmentation console prints `Epoch: [354/520] Iter:[0/495], Time: 4.11` then
`Iter:[10/495], Time: 0.66`: `Time` is a running average restarting with each epoch, and the epoch's first
iterations pay for the loader's restart and the eval or checkpoint at the boundary. That read as a WARNING
periodic_stall "costing 24-31% of the run time". Slow steps that nearly all fall at an epoch's start are the
epoch schedule's own cost, known in advance: info, with the cost. A loader that stalls every few steps and meets
an epoch start now and then stays a warning.

wild-logs-5 F1: the same console (a file that starts mid-run at epoch 352) fell 1.46 -> 1.23 over the file, slowly:
a plateau was opened early (2% better) and the verdict "the loss never came down from where it started; the model
is not learning" (WARNING) stood at the end. A plateau whose loss fell by the plateau bar (10%) by the end is slow
learning: info, and no underfitting verdict. A loss that stays flat still gets it.
"""

from __future__ import annotations

import random
from pathlib import Path

from stethoscope import records as R
from stethoscope.detect.throughput import ThroughputDetector
from stethoscope.diagnose.engine import diagnose_run
from stethoscope.importers.registry import read_any
from stethoscope.records import StepRecord

from .conftest import of_type, replay


def _console(path: Path, fall: float, epochs: int = 20, iters: int = 100) -> Path:
    """An HRNet-style console excerpt: a record every 10 iterations, `Time` a running average restarting each epoch."""
    rng = random.Random(0)
    lines = []
    for e in range(352, 352 + epochs):
        for i in range(0, iters, 10):
            t = 4.11 if i == 0 else 0.62 + rng.gauss(0, 0.01)
            loss = 1.45 - fall * (e - 352) / epochs + rng.gauss(0, 0.02)
            lines.append(f"Epoch: [{e}/520] Iter:[{i}/{iters}], Time: {t:.2f}, lr: [0.0175], Loss: {loss:.6f}, "
                         f"Acc:0.800000, Semantic loss: {loss * 0.7:.6f}, IC loss: {loss * 0.3:.6f}")
    path.write_text("\n".join(lines) + "\n")
    return path


def _diagnose(path: Path) -> list:
    (run,) = read_any(path)
    return diagnose_run(run).findings


def test_slow_first_steps_of_each_epoch_are_the_epoch_schedules_cost(tmp_path: Path) -> None:
    found = _diagnose(_console(tmp_path / "train.log", fall=0.2))
    (f,) = of_type(found, "periodic_stall")
    assert f.severity == "info" and f.evidence.get("epoch_time") is True, f
    assert "epoch's start" in f.message and "costing" in f.message


def test_a_slow_steady_descent_is_learning_not_a_plateau(tmp_path: Path) -> None:
    found = _diagnose(_console(tmp_path / "train.log", fall=0.2))  # 1.45 -> 1.25: 14% over the file
    assert not of_type(found, "underfitting"), [f.message for f in of_type(found, "underfitting")]
    (p,) = of_type(found, "plateau")
    assert p.severity == "info" and p.causes == ["a slow, steady descent"], p


def test_a_flat_loss_is_still_not_learning(tmp_path: Path) -> None:
    found = _diagnose(_console(tmp_path / "train.log", fall=0.02))  # 1.45 -> 1.43
    (f,) = of_type(found, "underfitting")
    assert f.severity == "warning", f


def _stalls(epoch_len: int | None, slow_every: int) -> list:
    n = 1000
    recs = []
    for s in range(n):
        values = {R.STEP_TIME: 10.0 if s % slow_every == 0 and s else 1.0}
        if epoch_len is not None:
            values["train/epoch"] = s // epoch_len
        recs.append(StepRecord(s, values))
    return of_type(replay(ThroughputDetector(), recs), "periodic_stall")


def test_the_same_stalls_with_no_epoch_counter_stay_a_warning() -> None:
    (f,) = _stalls(epoch_len=None, slow_every=100)
    assert f.severity == "warning" and "epoch_time" not in f.evidence, f


def test_a_loader_stalling_every_few_steps_that_meets_an_epoch_start_now_and_then_is_a_warning() -> None:
    (f,) = _stalls(epoch_len=100, slow_every=25)  # a quarter of the stalls fall at an epoch's start
    assert f.severity == "warning" and "epoch_time" not in f.evidence, f


def test_stalls_at_every_epoch_start_are_info() -> None:
    (f,) = _stalls(epoch_len=100, slow_every=100)
    assert f.severity == "info" and f.evidence["epoch_time"] is True, f
