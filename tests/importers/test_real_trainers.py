"""Every committed log of a real training library (tests/assets/real_trainers, made by
bench/real_trainers/make_logs.py) is read: its steps and its train loss, as the library logged them.

The libraries themselves are not installed here: the tests read the committed logs only."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from stethoscope.importers import read_any
from stethoscope.records import EVAL_LOSS, LOSS
from tests.importers.series import series

ROOT = Path(__file__).resolve().parents[1] / "assets" / "real_trainers"
CASES = json.loads((ROOT / "labels.json").read_text())


def test_the_set_has_six_libraries_each_with_both_splits() -> None:
    libs = {c["library"] for c in CASES}
    assert len(libs) >= 6
    for lib in libs:
        assert {c["split"] for c in CASES if c["library"] == lib} == {"dev", "heldout", "heldout2", "heldout3", "heldout4", "heldout5", "heldout6", "heldout7", "heldout8", "heldout9"}


# Known misreadings, each a bug to fix (strict: the test says when the fix lands)
KNOWN: dict[str, str] = {
    # (keras_fit-frozen-s9-console's epoch-end lines, Keras 3 bars under `Epoch 2/40`, are read at the
    # epoch's last step since readers-10: a bar under an `epoch E/M` head counts within that epoch)
}


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.xfail(reason=KNOWN[c["case"]], strict=True))
                                  if c["case"] in KNOWN else c for c in CASES], ids=[c["case"] for c in CASES])
def test_steps_and_loss_are_read(case: dict) -> None:
    runs = read_any(ROOT / case["file"])
    loss: dict[int, float] = {}
    for run in runs:
        loss.update(series(run, LOSS))
    logged = [(k, v) for k, v in case["logged_loss"] if math.isfinite(v)]
    assert logged, "the library's hook saw no loss"
    # every loss the library logged is read at its step, to the printed precision (Lightning's bar: 3 digits)
    missing = [k for k, _ in logged if k not in loss]
    assert len(missing) <= len(logged) // 20, f"steps not read: {missing[:10]}"
    if case["library"] != "mmengine_runner":  # mmengine prints the window's mean; its hook saw the last batch's
        wrong = [(k, v, loss[k]) for k, v in logged
                 if k in loss and not math.isclose(loss[k], v, rel_tol=6e-3, abs_tol=1e-4)]
        assert len(wrong) <= len(logged) // 20, f"(step, logged, read): {wrong[:5]}"
    # and no step past the last one the library logged (a progress bar's inner count is no later step)
    assert max(loss) <= max(k for k, _ in case["logged_loss"])


def _diagnosed(case: dict) -> list:
    from stethoscope.diagnose.engine import diagnose_run

    return [f for run in read_any(ROOT / case["file"]) for f in diagnose_run(run).findings]


@pytest.mark.parametrize("source", ["console", "file"])
def test_a_nan_the_trainer_logs_as_loss_0_is_a_nan_not_masked_labels(source: str) -> None:
    # the HF Trainer's logging_nan_inf_filter logs a window of only NaN losses as 0 while grad_norm reads nan
    case = next(c for c in CASES if c["library"] == "hf_trainer" and c["fault"] == "nan" and c["source"] == source)
    found = _diagnosed(case)
    assert not [f for f in found if f.type == "label_masking"]
    nan = [f for f in found if f.type == "nan"]
    assert nan and abs(nan[0].step - case["onset"]) <= 8
    assert "label_masking" in {s["type"] for s in nan[0].symptoms}


def test_hf_console_eval_losses_are_read_at_the_training_bar_step() -> None:
    # the evaluation's own tqdm bar (0/2, 2/2) is no training step: eval dicts belong to the outer bar
    case = next(c for c in CASES if c["library"] == "hf_trainer" and c["fault"] == "healthy" and c["source"] == "console")
    (run,) = read_any(ROOT / case["file"])
    assert sorted(series(run, EVAL_LOSS)) == list(range(32, 257, 32))


def test_lightning_bar_redraws_are_one_record_and_inner_bars_no_steps() -> None:
    # Lightning draws each count twice (old postfix, then new), again with val_loss= after validation, and
    # resets the bar to 0/32 with the finished epoch's values; the validation bar (2/2) counts its own batches
    case = next(c for c in CASES if c["library"] == "lightning_trainer" and c["fault"] == "healthy"
                and c["source"] == "console")
    (run,) = read_any(ROOT / case["file"])
    steps = [p.step for p in run.points if p.name == LOSS]
    assert len(steps) == len(set(steps)) == 64
    assert min(p.step for p in run.points) == 4
    assert sorted(series(run, EVAL_LOSS)) == list(range(32, 257, 32))


def test_lightning_bar_repeating_a_value_after_a_validation_is_a_new_eval() -> None:
    # frozen weights: every validation gives val_loss=0.935 again; a validation bar ran before each repeat,
    # so each is an eval of its own (the sign of weights that stopped changing), not the postfix carried over
    case = next(c for c in CASES if c["library"] == "lightning_trainer" and c["fault"] == "frozen"
                and c["seed"] == 0 and c["source"] == "console")
    (run,) = read_any(ROOT / case["file"])
    evals = series(run, EVAL_LOSS)
    assert sorted(evals) == list(range(32, 257, 32))
    assert [evals[s] for s in (128, 160, 192, 224, 256)] == [0.935] * 5


def test_mmengine_eval_loop_counter_is_no_training_step() -> None:
    # `Iter(val) [2/2]  val/loss: ...`: the validation loop's own counter; its values belong to the train step
    case = next(c for c in CASES if c["library"] == "mmengine_runner" and c["fault"] == "healthy"
                and c["source"] == "console")
    (run,) = read_any(ROOT / case["file"])
    assert sorted(series(run, EVAL_LOSS)) == list(range(32, 257, 32))
    assert min(series(run, LOSS)) == 4


def test_lightning_bar_nan_is_read_as_nan() -> None:
    # Lightning's bar prints a NaN loss as `train_loss=nan.0`
    case = next(c for c in CASES if c["library"] == "lightning_trainer" and c["fault"] == "nan"
                and c["source"] == "console" and c["split"] == "dev")
    (run,) = read_any(ROOT / case["file"])
    bad = [k for k, v in series(run, LOSS).items() if not math.isfinite(v)]
    assert bad and case["onset"] < min(bad) <= case["onset"] + 8


def test_ignite_validation_line_is_the_eval_of_the_epochs_last_iteration() -> None:
    # `Validation Results - Epoch[1] Avg loss: 1.2550`: the epoch says when the evaluation ran
    case = next(c for c in CASES if c["library"] == "ignite_engine" and c["fault"] == "healthy"
                and c["source"] == "console")
    (run,) = read_any(ROOT / case["file"])
    assert [[k, v] for k, v in sorted(series(run, EVAL_LOSS).items())] == [
        [k, pytest.approx(v, abs=1e-4)] for k, v in case["logged_eval"]]


def test_a_bar_redrawn_late_in_its_second_half_is_no_new_epoch() -> None:
    # Keras' bar once the loss is nan (keras_fit-nan-s0, epoch 25): 1/32, 26/32, 32/32, 31/32, 32/32, then epoch 26
    from stethoscope.logtext.console_epochs import bar_step
    from stethoscope.logtext.console_segment import bar_steps

    raw = [1, 26, 32, 31, 32, 1, 21, 32, 2, 32]
    want = [1, 26, 32, 32, 32, 33, 53, 64, 66, 96]
    state, one_by_one = None, []
    for r in raw:
        step, state = bar_step(state, r)
        one_by_one.append(step)
    assert one_by_one == want
    assert bar_steps(raw[:4], None)[0].tolist() + bar_steps(raw[4:], bar_steps(raw[:4], None)[1])[0].tolist() == want
