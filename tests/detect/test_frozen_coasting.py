"""Weights that stopped late in a run, seen as the optimizer's momentum running out (`detect.eval_frozen`).

With the gradients gone, Adam keeps moving the weights by a step that shrinks by beta1 = 0.9 each step: over
32-step eval intervals each eval moves ~0.9^32 = 1/30 of the move before, in one direction, and the log can end
before two evals repeat one value (Ignite prints 4 decimals, 8 epochs: the stop in epoch 5 left 0.9549 -> 0.9582
-> 0.9583 -> 0.9583). Such a run was called healthy."""

from __future__ import annotations

import math

import pytest

from stethoscope.detect.eval_frozen import EvalFrozen
from stethoscope.diagnose.engine import diagnose_run
from stethoscope.findings.catalogue import FROZEN_LOSS
from stethoscope.importers import read_any
from tests.detect.test_eval_frozen import CASES, ROOT, _stops  # the same assets and the same detector loop


def _found(case: str) -> tuple[list, int]:
    c = CASES[case]
    (d,) = [diagnose_run(run) for run in read_any(ROOT / c["file"])]
    (label,) = [lb["step"] for lb in c["labels"] if lb["type"] == "plateau"]
    return [f for f in d.findings if f.type == FROZEN_LOSS], label


@pytest.mark.parametrize(("case", "severity"), [("ignite_engine-frozen-s3-console", "info"),
                                                ("lightning_trainer-frozen-s3-console", "info"),
                                                ("lightning_trainer-frozen-s3-file", "warning")])
def test_a_real_run_whose_log_ends_in_the_momentum_tail_is_found_at_the_stop(case: str, severity: str) -> None:
    # Ignite s3: 0.8665 (128), 0.8659 (160), then +0.0113, +0.0004, +0.0001: no two evals repeat; Lightning's
    # metrics.csv: +0.00988, +0.000441, +0.0000166 (each 1/25 of the one before). Stop at 150, evals every 32
    stops, label = _found(case)
    assert len(stops) == 1 and stops[0].severity == severity, stops
    assert abs(stops[0].step - label) <= 8, (stops[0].step, label)
    assert "momentum running out" in stops[0].message


@pytest.mark.parametrize("digits", [4, 6])
def test_a_geometric_collapse_after_a_descent_is_a_stop_graded_by_the_print(digits: int) -> None:
    curve = [1.30, 1.16, 1.055, 0.99]  # a descent; the stop at 112, then each move 1/30 of the one before
    tail = [0.99 - 0.02, 0.99 - 0.02 - 0.02 / 30, 0.99 - 0.02 - 0.02 / 30 - 0.02 / 900]
    evals = [(32 * (i + 1), round(v, digits)) for i, v in enumerate(curve + tail)]
    (f,) = _stops(evals)
    assert f.severity == ("warning" if digits >= 6 else "info")
    assert f.evidence["coasting"] and f.evidence["last_learning_eval"] == 160


def test_a_converging_run_whose_evals_keep_their_noise_is_not_a_stop() -> None:
    # a healthy run at its floor: the eval moves by its noise (+-0.003) from one eval to the next, and one of
    # them happens to be small: one collapse is chance, the next move is back at the noise
    evals = [(32, 1.30), (64, 1.16), (96, 1.055), (128, 0.99), (160, 0.962), (192, 0.9651), (224, 0.9649),
             (256, 0.9622), (288, 0.9641)]
    assert _stops(evals) == []


def test_an_lr_annealed_to_zero_slows_the_evals_by_less_than_a_momentum_tail() -> None:
    # a cosine to 0 whose LR the log does not show: the last intervals move 19 : 7 : 1 (the LR's integral)
    evals = [(32 * (i + 1), v) for i, v in enumerate([1.30, 1.16, 1.055, 0.99, 0.96])]
    for share in (19, 7, 1):
        evals.append((evals[-1][0] + 32, round(evals[-1][1] - 0.0005 * share, 6)))
    assert _stops(evals) == []


def test_a_collapse_that_turns_back_is_noise_not_momentum() -> None:
    evals = [(32, 1.30), (64, 1.16), (96, 1.055), (128, 0.99), (160, 0.9700), (192, 0.9712), (224, 0.9711),
             (256, 0.9712)]
    assert _stops(evals) == []  # +0.0012, then -0.0001, +0.0001: a move back within a unit is the print, but
    evals[-1] = (256, 0.97085)  # a resolved move against the tail's direction is a model still moving
    assert _stops(evals) == []


def test_a_tail_that_rose_past_the_evals_minimum_dates_the_stop_within_the_momentums_reach_before_it() -> None:
    # the last fall (0.0006, into 160) is the net of a descent to the eval's minimum and a rise after it: the
    # rise that follows is the momentum carrying on past it. Dated by the fall's size, the stop was put at 113
    # (label 150); it lies within the momentum's reach (1 / (1 - beta1) = 10 steps) before the minimum's eval:
    # half of it on average (2/3 into the interval, 149, before detect-18)
    evals = [(32, 1.2805), (64, 1.1018), (96, 0.9411), (128, 0.8665), (160, 0.8659), (192, 0.8772),
             (224, 0.8776), (256, 0.8777)]
    (f,) = _stops(evals)
    assert f.step == 155 and f.evidence["last_learning_eval"] == 160


def test_a_tail_past_the_minimum_after_a_full_fall_keeps_the_date_the_fall_gives() -> None:
    # Lightning s2: the fall into 95 is as big as the descent predicts (the stop at 91, at the interval's end)
    stops, label = _found("lightning_trainer-frozen-s2-file")
    assert len(stops) == 1 and abs(stops[0].step - label) <= 2, (stops[0].step, label)


def test_a_coasting_stop_seen_live_is_taken_back_when_the_eval_moves_again() -> None:
    curve = [1.30, 1.16, 1.055, 0.99, 0.97, 0.97 - 0.02 / 30, 0.97 - 0.02 / 30 - 0.02 / 900]
    ef = EvalFrozen()
    found = [f for i, v in enumerate(curve) if (f := ef.update(32 * (i + 1), round(v, 6), None)) is not None]
    assert len(found) == 1 and found[0].severity == "warning"
    back = ef.update(32 * 8, 0.95, None)  # the eval fell 0.02 again: the weights were moving all along
    assert back is not None and back.severity == "info" and "moved again" in back.message
    assert math.isclose(back.evidence["moved_again"], 256)


def test_a_loss_converging_fast_to_its_floor_is_not_a_momentum_tail() -> None:
    # SmolVLM fine-tuning (HF trainer_state, wild-logs-2), full float precision: the eval loss fell 0.0448, 0.00575,
    # 0.000209, 4.5e-6, each a small share of the one before, then went on falling by its noise. A tail of momentum
    # ends at the print's resolution; 4.5e-6 on 0.00285 is 1,600 times the float drift a frozen model shows
    evals = [(50, 0.053569696843624115), (100, 0.008818799629807472), (150, 0.0030662650242447853),
             (200, 0.0028571973089128733), (250, 0.002852653618901968), (300, 0.0026737006846815348),
             (350, 0.002477991161867976)]
    assert _stops(evals, lr=2e-4) == []
