from __future__ import annotations

import random

from stethoscope.detect.config import DetectConfig
from stethoscope.detect.overfit import OverfitDetector

from .conftest import make_records, of_type, replay


def _run(evals, patience=3):
    steps = list(range(100, 100 * (len(evals) + 1), 100))
    train = [2.0 * 0.97 ** i for i in range(len(evals))]
    return replay(OverfitDetector(DetectConfig(overfit_patience=patience)),
                  make_records(steps, LOSS=train, EVAL_LOSS=evals))


def test_raised_within_patience_of_the_minimum_and_names_the_best_step():
    evals = [1.0, 0.8, 0.7, 0.65, 0.7, 0.75, 0.8, 0.9, 1.0]
    det = OverfitDetector()
    steps = list(range(100, 1000, 100))
    raised_at = None
    for r in make_records(steps, LOSS=[2.0 * 0.97 ** i for i in range(9)], EVAL_LOSS=evals):
        if of_type(det.update(r), "overfitting") and raised_at is None:
            raised_at = r.step
    assert raised_at == 700, "raised at the 3rd eval after the minimum (step 400)"
    (f,) = of_type(_run(evals), "overfitting")
    assert f.step == 400 and f.severity == "warning"
    assert "keep the checkpoint of step 400" in f.message


def test_noise_sized_rise_is_info_and_a_new_best_withdraws_it():
    evals = [1.0, 0.95, 0.9, 0.85, 0.87, 0.875, 0.872, 0.84]
    (f,) = of_type(_run(evals), "overfitting")
    assert f.severity == "info" and f.evidence.get("withdrawn")


def test_train_loss_rising_too_is_not_overfitting():
    steps = list(range(100, 900, 100))
    found = replay(OverfitDetector(), make_records(steps, LOSS=[1.0 + 0.1 * i for i in range(8)],
                                                   EVAL_LOSS=[1.0, 0.9, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3]))
    assert not of_type(found, "overfitting")


def test_eval_too_sparse():
    steps = list(range(0, 5000, 10))
    evals = [None] * len(steps)
    evals[-1] = 1.0
    (f,) = of_type(replay(OverfitDetector(), make_records(steps, LOSS=[1.0] * len(steps), EVAL_LOSS=evals)),
                   "eval_sparse")
    assert f.severity == "info"


def test_a_train_loss_wobble_does_not_move_the_best_eval():
    """Memorising a repeated window: the eval minimum is at step 450; the next eval is worse while the
    train loss wobbled up by 0.5% (its noise), the one after dips but stays above the minimum, then it
    climbs. The checkpoint to keep is 450's, not the dip's."""
    steps = list(range(375, 580, 5))
    train = [2.10 if s <= 450 else 2.11 if s <= 475 else 2.11 - 0.004 * (s - 475) for s in steps]
    at = {375: 2.20, 400: 2.16, 425: 2.18, 450: 2.1065, 475: 2.13, 500: 2.1174, 525: 2.30, 550: 2.54, 575: 2.69}
    evals = [at.get(s) for s in steps]
    (f,) = of_type(replay(OverfitDetector(), make_records(steps, LOSS=train, EVAL_LOSS=evals)), "overfitting")
    assert f.evidence["best_step"] == 450, f


def test_a_flat_noisy_eval_curve_is_not_overfitting_because_its_luckiest_eval_was_low():
    """Evals flat at 2.1 with 1% noise while the train loss creeps down 2%: the best eval is the lowest of
    dozens of noisy ones, ~2 of their sigmas under their level, and the next evals 'rose' past the noise
    from it (a warning on such runs before)."""
    for seed in range(12):
        rng = random.Random(seed)
        steps = list(range(100, 12_100, 100))
        train = [2.0 * (1 - 0.02 * i / len(steps)) for i in range(len(steps))]
        evals = [2.1 * (1 + 0.01 * rng.gauss(0, 1)) for _ in steps]
        found = [f for f in replay(OverfitDetector(), make_records(steps, LOSS=train, EVAL_LOSS=evals))
                 if f.type == "overfitting" and f.severity != "info"]
        assert not found, (seed, [f.message for f in found])


def test_a_rise_first_inside_the_noise_becomes_a_warning_when_it_keeps_rising():
    """The 3rd eval after the best decides: here the first eval after it is barely above it, so the rise is
    'possible' (info); the evals that follow climb far past the noise, and it is overfitting after all."""
    evals = [3.0, 2.8, 2.7, 2.62, 2.55, 2.5, 2.47, 2.45, 2.44, 2.445, 2.6, 2.8, 3.0, 3.2, 3.4]
    steps = list(range(100, 100 * (len(evals) + 1), 100))
    train = [2.5 * 0.97 ** i for i in range(len(evals))]
    det = OverfitDetector()
    seen = [(r.step, f.severity, f.step) for r in make_records(steps, LOSS=train, EVAL_LOSS=evals)
            for f in of_type(det.update(r), "overfitting")]
    assert seen[0] == (1200, "info", 900), seen  # the 3rd eval after the best: 2.445 is inside the noise
    assert seen[-1][1:] == ("warning", 900) and seen[-1][0] <= 1400, seen


def test_an_eval_perplexity_alone_is_read_as_its_log():
    """A log whose eval line gives only a perplexity (`val ppl`): overfitting found from its log."""
    import math

    from stethoscope.detect.overfit import EVAL_PPL
    from stethoscope.records import StepRecord

    evals = [1.0, 0.8, 0.7, 0.65, 0.7, 0.75, 0.8, 0.9, 1.0]
    records = [StepRecord(100 * (i + 1), {"train/loss": 2.0 * 0.97 ** i, EVAL_PPL: math.exp(v)})
               for i, v in enumerate(evals)]
    (f,) = of_type(replay(OverfitDetector(DetectConfig(overfit_patience=3)), records), "overfitting")
    assert f.step == 400 and f.severity == "warning"


def _epochs(train, evals):
    """A log counted in epochs (Keras' CSVLogger, skorch's table): one train and one eval loss per step."""
    return replay(OverfitDetector(), make_records(list(range(len(train))), LOSS=train, EVAL_LOSS=evals))


def test_an_epoch_counted_log_whose_train_loss_jumped_with_its_eval_is_not_overfitting():
    # keras_fit-lr_jump-s1 (CSVLogger): evals flat at 0.89-0.90 from epoch 5, then the LR x100 at epoch 13
    # lifts the train loss 0.66 -> 1.39 and the eval loss 0.90 -> 1.37 together
    train = [1.297 * 0.93 ** i for i in range(13)] + [1.243, 1.353, 1.397, 1.47] + [1.387] * 20
    evals = [1.198, 1.062, 0.974, 0.932, 0.904, 0.898, 0.899, 0.892, 0.893, 0.894, 0.899, 0.898, 0.899] + \
            [1.323, 1.281, 1.401, 1.541] + [1.37 + 0.01 * (i % 3) for i in range(20)]
    assert not [f for f in of_type(_epochs(train, evals), "overfitting") if f.severity != "info"]


def test_an_epoch_counted_log_that_overfits_is_still_overfitting():
    train = [1.3 * 0.93 ** i for i in range(30)]
    evals = [1.2 * 0.93 ** i for i in range(10)] + [1.2 * 0.93 ** 9 * (1 + 0.03 * i) for i in range(1, 21)]
    (f,) = of_type(_epochs(train, evals), "overfitting")
    assert f.severity == "warning" and f.step == 9
