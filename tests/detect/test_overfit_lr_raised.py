"""An eval that rose after the LR was raised many-fold in one record is the jump's doing, not overfitting
(`detect.overfit`, `_lr_raised`).

A tiny GPT's Lightning metrics.csv (tests/assets/gpt_runs/lr_jump-s30, scored once as held-out in session 12): the
best eval at step 119 came while the train loss still fell fast, so its smoothed level lagged (3.155); the LR went
x62 at step 141, the train loss jumped and fell back to 2.80, below that lagging level, and the evals after the jump
(2.82-3.20, all above the best 2.662) read as 'overfitting at step 119' at warning. Warm restarts raise the LR the
same way: the evals after one are judged from their own best."""

from __future__ import annotations

from pathlib import Path

import pytest

from stethoscope.diagnose.engine import diagnose_run
from stethoscope.findings.catalogue import OVERFITTING
from stethoscope.importers import read_any
from stethoscope.logtext.columns import ImportedRun
from stethoscope.records import LR, StepRecord

LOG = Path(__file__).resolve().parents[1] / "assets" / "gpt_runs" / "lr_jump-s30" / "metrics.csv.gz"


def _overfitting(run) -> list:
    return [f for f in diagnose_run(run).findings if f.type == OVERFITTING and f.severity != "info"]


def test_an_eval_rise_after_an_lr_raised_sixtyfold_is_no_overfitting() -> None:
    (run,) = read_any(LOG)
    assert any(p.name == LR for p in run.points)
    assert _overfitting(run) == []


def test_without_the_lr_the_same_evals_read_as_overfitting() -> None:
    # the guard: the LR is what tells the two apart (nanoGPT's console prints none and still reads so)
    (run,) = read_any(LOG)
    run = ImportedRun(run.path, run.format, points=[p for p in run.points if p.name != LR], meta=run.meta)
    found = _overfitting(run)
    assert found and found[0].step == 119, found


@pytest.mark.parametrize("factor, kept", [(2.0, True), (60.0, False)])
def test_a_schedule_step_keeps_the_judgement_and_a_jump_restarts_it(factor: float, kept: bool) -> None:
    from stethoscope.detect.overfit import OverfitDetector
    from stethoscope.records import EVAL_LOSS, LOSS

    det, out = OverfitDetector(), []
    evals = {40: 3.0, 80: 2.7, 120: 2.6, 160: 3.1, 200: 2.95, 240: 2.9, 280: 2.88, 320: 2.87}
    for step in range(0, 330, 10):
        lr = 1e-3 * (factor if step >= 130 else 1.0)
        values = {LOSS: 3.2 * 0.997 ** step, LR: lr}
        if step in evals:
            values[EVAL_LOSS] = evals[step]
        out += det.update(StepRecord(step, values))
    out += det.finish()
    from_best = [f for f in out if f.type == OVERFITTING and f.step == 120]  # the best eval before the raise
    assert bool(from_best) == kept, out
    assert kept or not [f for f in out if f.type == OVERFITTING], out  # after a jump: judged from 3.1 on, falling
