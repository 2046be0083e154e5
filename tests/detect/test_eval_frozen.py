"""Weights that stopped changing, seen on the eval loss (`detect.eval_frozen`, run by `OverfitDetector`):
on the committed logs of real libraries with frozen weights, and guards on curves that only look alike."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from stethoscope.detect.eval_frozen import EvalFrozen
from stethoscope.detect.overfit import OverfitDetector
from stethoscope.diagnose.engine import diagnose_run
from stethoscope.importers import read_any
from stethoscope.records import EVAL_LOSS, LOSS, LR, StepRecord

ROOT = Path(__file__).resolve().parents[1] / "assets" / "real_trainers"
CASES = {c["case"]: c for c in json.loads((ROOT / "labels.json").read_text())}


def _stops(evals: list[tuple[int, float]], lr: float | None = None) -> list:
    ef, out = EvalFrozen(), []
    for step, v in evals:
        ef.lr(lr)
        f = ef.update(step, v, lr)
        if f is not None:
            out.append(f)
    return out


@pytest.mark.parametrize("case", ["hf_trainer-frozen-s0-file", "lightning_trainer-frozen-s1-file",
                                  "keras_fit-frozen-s2-file"])
def test_a_real_library_run_whose_weights_froze_is_found_at_the_stop(case: str) -> None:
    c = CASES[case]
    (d,) = [diagnose_run(run) for run in read_any(ROOT / c["file"])]
    (label,) = [lb["step"] for lb in c["labels"] if lb["type"] == "plateau"]
    losses = [s for s, _ in c["logged_loss"]]
    gap = sorted(b - a for a, b in zip(losses, losses[1:]))[len(losses) // 2]
    stops = [f for f in d.findings if f.evidence.get("series") == "eval/loss"]
    assert len(stops) == 1 and stops[0].type == "frozen_loss" and stops[0].severity in ("warning", "error")
    assert abs(stops[0].step - label) <= 2 * gap, (stops[0].step, label, gap)
    assert "weights stopped changing" in stops[0].message


def test_one_stop_seen_on_the_eval_and_then_the_train_loss_is_one_incident_at_the_earlier_onset() -> None:
    # Keras' CSV: the eval loss repeats from epoch 15 (the stop dated 13), the epoch-mean train loss from 16
    c = CASES["keras_fit-frozen-s2-file"]
    (d,) = [diagnose_run(run) for run in read_any(ROOT / c["file"])]
    stops = [f for f in d.findings if f.type in ("frozen_loss", "plateau", "grad_vanishing")]
    assert [(f.type, f.step) for f in stops] == [("frozen_loss", 13)]
    assert stops[0].severity == "error"  # the train loss's exact repeat raised it


def test_no_healthy_real_library_run_is_called_frozen() -> None:
    for name, c in CASES.items():
        if c["fault"] in ("frozen",) or c["split"] != "dev":
            continue
        for run in read_any(ROOT / c["file"]):
            found = [f for f in diagnose_run(run).findings if f.evidence.get("series") == "eval/loss"]
            assert not found, (name, found)


def test_the_stop_is_dated_inside_the_interval_that_still_learned() -> None:
    # evals every 32 steps: a descent, the weights stop 3/4 into the third interval, then momentum runs out
    evals = [(32, 1.30), (64, 1.16), (96, 1.055), (128, 1.0505), (160, 1.05043), (192, 1.050429), (224, 1.050429)]
    (f,) = _stops(evals)
    # the fall into 96 (0.105) is 3/4 of what the deceleration predicts (0.14 * 1.0): the stop is at 64 + 24
    assert f.step == 88 and f.severity == "warning" and f.evidence["first_same_step"] == 160


def test_a_low_precision_print_needs_three_repeats_and_is_info() -> None:
    evals = [(32, 1.3), (64, 1.16), (96, 1.06), (128, 1.0512), (160, 1.0512)]
    assert _stops(evals) == []  # one repeat of a 5-digit print (4 decimals): a coincidence at a floor is possible
    (f,) = _stops(evals + [(192, 1.0512)])
    assert f.severity == "info" and "significant digits" in f.message


def test_an_lr_annealed_to_zero_is_the_schedule_ending_not_a_stop() -> None:
    evals = [(32, 1.30), (64, 1.16), (96, 1.055), (128, 1.0505), (160, 1.050429), (192, 1.050429)]
    ef = EvalFrozen()
    ef.lr(1e-3)
    assert [f for s, v in evals if (f := ef.update(s, v, 1e-6)) is not None] == []


def test_a_flat_curve_without_a_descent_before_is_not_a_stop() -> None:
    # a loss printed at 2 decimals that never moved much: repeats say nothing about the weights
    assert _stops([(i * 10, 2.31 + (0.01 if i % 3 == 0 else 0.0)) for i in range(1, 7)] + [(70, 2.31), (80, 2.31)]) == []


def test_the_overfit_detector_reports_it_once_from_records() -> None:
    det, out = OverfitDetector(), []
    evals = dict([(32, 1.30), (64, 1.16), (96, 1.055), (128, 1.0505), (160, 1.050429), (192, 1.050429),
                  (224, 1.050429)])
    for step in range(1, 225):
        values = {LOSS: 1.0 + 0.1 * math.sin(step), LR: 1e-3}
        if step in evals:
            values[EVAL_LOSS] = evals[step]
        out += det.update(StepRecord(step=step, values=values))
    stops = [f for f in out if f.evidence.get("series") == "eval/loss"]
    assert len(stops) == 1 and stops[0].step == 88
    restored = OverfitDetector()
    restored.load_state_dict(json.loads(json.dumps(det.state_dict())))
    assert restored.frozen.reported and restored.frozen.evals == det.frozen.evals


def test_a_repeat_printed_with_trailing_zeros_is_judged_at_the_logs_precision() -> None:
    # Lightning's bar prints val_loss=1.000 (read back as 1.0: one decimal) after 0.999 (three): at one decimal's
    # tolerance the 0.999 merged into the repeats and left too few evals before them to see a descent
    evals = [(32, 1.29), (64, 1.13), (96, 0.999), (128, 1.0), (160, 1.0), (192, 1.0), (224, 1.0)]
    (f,) = _stops(evals)
    assert f.severity == "info" and abs(f.step - 91) <= 8 and f.evidence["first_same_step"] == 128
    c = CASES["lightning_trainer-frozen-s2-console"]
    (d,) = [diagnose_run(run) for run in read_any(ROOT / c["file"])]
    (label,) = [lb["step"] for lb in c["labels"] if lb["type"] == "plateau"]
    assert [abs(x.step - label) <= 8 for x in d.findings if x.type == "frozen_loss"] == [True]


@pytest.mark.parametrize("case", ["mmengine_runner-frozen-s3-file", "lightning_trainer-frozen-s4-file",
                                  "keras_fit-frozen-s0-console"])
def test_a_stop_whose_tail_overshot_or_whose_descent_was_slowing_is_dated_in_its_interval(case: str) -> None:
    # mmengine s3 (stop at 150; evals every 32): falls 0.172, 0.167, 0.073, 0.017 (the eval at 160 learned for 10
    # steps), then a RISE of 0.005 (the momentum past the eval's minimum), 0.0002, 0.00001. The rise was read as
    # learning (dated 162); Lightning s4's partial fall (0.0137 after 0.0562) as the tail (dated 109 for 147)
    c = CASES[case]
    (d,) = [diagnose_run(run) for run in read_any(ROOT / c["file"])]
    (label,) = [lb["step"] for lb in c["labels"] if lb["type"] == "plateau"]
    losses = [s for s, _ in c["logged_loss"]]
    gap = sorted(b - a for a, b in zip(losses, losses[1:]))[len(losses) // 2]
    stops = [f for f in d.findings if f.type == "frozen_loss"]
    assert len(stops) == 1 and abs(stops[0].step - label) <= 2 * gap, (stops[0].step, label, gap)


def test_the_stop_is_dated_against_the_descent_slowing_down() -> None:
    # each fall 0.4 of the one before while learning; the eval after the stop fell 0.25 of the one before (it learned
    # for part of its interval): not yet the tail
    evals = [(32, 1.30), (64, 1.14), (96, 1.0760), (128, 1.0504), (160, 1.04400), (192, 1.043950), (224, 1.043950),
             (256, 1.043950)]
    (f,) = _stops(evals)
    assert 128 < f.step < 160


def test_a_late_move_is_judged_against_the_learning_before_it_not_the_untrained_start() -> None:
    """A tiny GPT whose LR went to 0 at 286 (bench/gpt_runs frozen-s2): the evals at 280 and 320 still differ, so
    the stop is after 280. "Barely moved" compared a move with the largest of the run, the untrained model's
    first fall (4.54 -> 2.97: x120 a late move), so every late move read as the tail and the stop was dated 240."""
    evals = [(0, 4.5355), (40, 2.9671), (80, 2.8197), (120, 2.7351), (160, 2.6465), (200, 2.6187), (240, 2.5706),
             (280, 2.5810), (320, 2.5679), (360, 2.5679), (400, 2.5679), (440, 2.5679), (480, 2.5679)]
    (f,) = _stops(evals)
    assert 280 < f.step <= 320 and f.evidence["last_learning_eval"] == 320, f.message
