"""Frozen weights dated by the grad norm when the log has one (`detect.eval_frozen`, `EvalFrozen.grad`).

The evals only bound a stop by their interval and the optimizer's momentum tail after it (the HF Trainer's
trainer_state.json, stop at 161: the eval at 192 still fell 0.0069, and the share estimate said 182, 21 steps
late). A logged grad norm of exactly 0 from a step on is the stop itself, at the step it happened."""

from __future__ import annotations

from stethoscope.detect.overfit import OverfitDetector
from stethoscope.diagnose.engine import diagnose_run
from stethoscope.findings.catalogue import FROZEN_LOSS
from stethoscope.importers import read_any
from stethoscope.records import EVAL_LOSS, GRAD_NORM, LOSS, StepRecord
from tests.detect.test_eval_frozen import CASES, ROOT

# the HF run above: a descent, the stop at 161, the momentum tail (192, 224), then repeats
_EVALS = {32: 1.23465, 64: 1.09171, 96: 0.988273, 128: 0.931954, 160: 0.908072, 192: 0.90116, 224: 0.901026,
          256: 0.901024, 288: 0.901024}


def _run(zero_from: int | None, back_at: int | None = None) -> list:
    det, out = OverfitDetector(), []
    for step in range(4, 292, 4):
        values = {LOSS: 0.9, GRAD_NORM: 0.0 if zero_from is not None and step >= zero_from and
                  (back_at is None or step < back_at) else 0.7}
        if step in _EVALS:
            values[EVAL_LOSS] = _EVALS[step]
        out += [f for f in det.update(StepRecord(step=step, values=values)) if f.type == FROZEN_LOSS]
    return out


def test_a_grad_norm_of_zero_from_a_step_dates_the_stop_there() -> None:
    (f,) = _run(zero_from=164)
    assert f.step == 164 and f.severity == "warning", f
    assert f.evidence["zero_grad_step"] == 164
    assert "grad norm is 0 from there on" in f.message


def test_without_a_grad_norm_the_evals_still_date_it() -> None:
    (f,) = _run(zero_from=None)
    assert 160 < f.step <= 192 and "zero_grad_step" not in f.evidence, f


def test_a_grad_norm_that_came_back_says_nothing_about_the_stop() -> None:
    (f,) = _run(zero_from=100, back_at=120)
    assert f.step != 100 and "zero_grad_step" not in f.evidence, f


def test_the_hf_trainers_state_file_dates_the_stop_where_its_grad_norm_went_to_zero() -> None:
    c = CASES["hf_trainer-frozen-s13-file"]  # a spent split: development data
    (d,) = [diagnose_run(run) for run in read_any(ROOT / c["file"])]
    (label,) = [lb["step"] for lb in c["labels"] if lb["type"] == "plateau"]
    (f,) = [f for f in d.findings if f.type == FROZEN_LOSS]
    assert f.step == 164 and abs(f.step - label) <= 8, (f.step, label)
