"""An eval loss printed back at its best value (a tie at the print's precision) is the best again: overfitting is
dated after the last eval at the best, where the gap starts to grow (`detect.overfit`).

Keras' console prints `val_loss: 0.8864` at epochs 7 and 9 (0.8864141 and 0.8863508 in its CSV); Lightning's bar
prints `val_loss=1.39` at steps 4, 16, 24 and 28. The first of the equal prints was named the best, 64 and 24 steps
before the eval the run left its best at. A log cannot tell which of two equal prints was lower; the later one is
as good a checkpoint, and the gap cannot have started growing while the eval was still back at its best."""

from __future__ import annotations

from stethoscope.diagnose.engine import diagnose_run
from stethoscope.importers import read_any
from tests.detect.test_eval_frozen import CASES, ROOT

from .test_overfit import _run, of_type


def test_an_eval_printed_at_the_best_value_again_is_the_best() -> None:
    evals = [1.0, 0.8, 0.7, 0.6531, 0.66, 0.6531, 0.70, 0.75, 0.8, 0.9, 1.0]
    (f,) = of_type(_run(evals), "overfitting")
    assert f.step == 600 and f.evidence["best_step"] == 600
    assert "keep the checkpoint of step 600" in f.message


def test_a_lower_eval_before_stays_the_best() -> None:
    evals = [1.0, 0.8, 0.7, 0.6530, 0.66, 0.6531, 0.70, 0.75, 0.8, 0.9, 1.0]
    (f,) = of_type(_run(evals), "overfitting")
    assert f.step == 400


def test_a_real_lightning_bar_with_the_best_printed_four_times_is_dated_at_the_last() -> None:
    c = CASES["lightning_trainer-overfit-s20-console"]  # val_loss=1.39 at 4, 16, 24, 28; 1.3873 at 28 the lowest
    (d,) = [diagnose_run(run) for run in read_any(ROOT / c["file"])]
    found = [f for f in d.findings if f.type == "overfitting" and f.severity in ("warning", "error")]
    assert [f.step for f in found] == [28]
