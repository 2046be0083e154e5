"""A loss printed as 0 at its print's resolution (`detect.frozen.print_zero`), and a run whose train and eval loss
both stood still for half of it (`detect.frozen.stalled_run`).

wild-logs-5 F2: a PaiNN console printed `Epoch [2/650], Train Loss: 0.0000, Train L1 Loss: 0.0364` (4 decimals, an
MSE below 5e-5) while the L1 column fell 0.18 -> 0.02. That read as "ERROR label_masking: loss is exactly 0 ...
every label is masked out" and "WARNING the loss never came down (0 -> 0)". A loss at 0 while a sibling loss of
the same record moves, or one that leaves 0 by a printed unit (0.0001), is the print's resolution: info. A loss
that drops from a real value to exactly 0 with nothing else moving is still masked labels (error).

wild-logs-5 X2: another PaiNN run printed `Train Loss: 0.0136` for 367 of its 650 epochs while its validation loss
stayed 0.0222 -> 0.0221 (an LR cut to 2e-6): "info frozen_loss ... repeats such a print by chance". Train and eval
both within one printed unit for half the run is no chance: the compute of that half bought nothing (warning).
"""

from __future__ import annotations

import random
from pathlib import Path

from stethoscope.diagnose.engine import diagnose_run
from stethoscope.importers.registry import read_any
from stethoscope.records import LOSS, StepRecord

from .conftest import of_type, replay_set


def _painn(path: Path, train: list[float], val: list[float], l1: list[float]) -> Path:
    lines = ["Starting training", ""]
    n = len(train)
    for e in range(n):
        lines.append(f"Epoch [{e + 1}/{n}], Train Loss: {train[e]:.4f}, Train L1 Loss: {l1[e]:.4f}")
        lines.append(f"Epoch [{e + 1}/{n}], Validation Loss: {val[e]:.4f}, Validation L1: {l1[e] * 1.2:.4f}, "
                     f"Smoothed Validation Loss: {val[e]:.4f}")
    path.write_text("\n".join(lines) + "\n")
    return path


def _findings(path: Path) -> list:
    (run,) = read_any(path)
    return diagnose_run(run).findings


def test_a_loss_printed_as_0_while_its_sibling_moves_is_the_prints_resolution(tmp_path: Path) -> None:
    rng = random.Random(1)
    n = 120
    train = [0.0212] + [0.0001 if e in (4, 5) else 0.0 for e in range(1, n)]
    l1 = [0.18] + [0.02 + 0.03 * (1 - e / n) + rng.gauss(0, 0.003) for e in range(1, n)]
    found = _findings(_painn(tmp_path / "painn.md", train, [0.0] * n, l1))
    assert not of_type(found, "label_masking"), [f.message for f in of_type(found, "label_masking")]
    assert not of_type(found, "underfitting"), [f.message for f in of_type(found, "underfitting")]
    (f,) = [f for f in of_type(found, "frozen_loss") if f.step == 2]
    assert f.severity == "info" and f.evidence["print_resolution"] is True, f
    assert "train/l1_loss" in f.message


def test_a_loss_that_drops_to_exactly_0_with_nothing_moving_is_still_masked_labels(tmp_path: Path) -> None:
    n = 60
    train = [2.3, 2.2, 2.1] + [0.0] * (n - 3)
    l1 = [0.9, 0.85, 0.8] + [0.0] * (n - 3)
    found = _findings(_painn(tmp_path / "painn.md", train, [2.0] * n, l1))
    (f,) = of_type(found, "label_masking")
    assert f.severity == "error" and f.step == 4, f


def _stalled(val_tail: list[float], n: int = 200, flat_from: int = 80) -> list[float]:
    rng = random.Random(2)
    train = [0.17 * (0.0136 / 0.17) ** (e / flat_from) + rng.gauss(0, 0.0005) if e < flat_from else 0.0136
             for e in range(n)]
    val = [0.07 - 0.045 * e / flat_from for e in range(flat_from)] + val_tail
    l1 = [1.9 - 1.1 * min(e, flat_from) / flat_from - 0.000008 * max(e - flat_from, 0) for e in range(n)]
    return [train, val, l1]


def test_train_and_eval_standing_still_for_half_the_run_is_a_stalled_run(tmp_path: Path) -> None:
    tail = [0.0222] * 70 + [0.0221] * 50  # within one printed unit
    found = _findings(_painn(tmp_path / "painn.md", *_stalled(tail)))
    (f,) = [f for f in of_type(found, "frozen_loss") if f.end_step == 200]
    assert f.severity == "warning" and f.evidence["stalled_share"] >= 0.5, f
    assert "eval loss stayed within one printed unit" in f.message


def test_a_repeated_train_print_while_the_eval_still_improves_is_info(tmp_path: Path) -> None:
    tail = [0.0300 - 0.0080 * i / 120 for i in range(120)]  # 0.0300 -> 0.0220: the model still changes
    found = _findings(_painn(tmp_path / "painn.md", *_stalled(tail)))
    assert [f.severity for f in of_type(found, "frozen_loss") if f.end_step == 200] == ["info"]


def test_a_loss_logged_in_full_that_drops_to_0_beside_a_moving_aux_loss_is_masked_labels() -> None:
    rng = random.Random(3)
    recs = [StepRecord(s, {LOSS: (2.3456789 - 0.001 * s if s < 20 else 0.0), "train/aux_loss": 0.01 + rng.random()})
            for s in range(60)]
    (f,) = of_type(replay_set(recs), "label_masking")
    assert f.severity == "error" and f.step == 20, f


def _repeat(evals: list[float | None]) -> list:
    """An epoch loss falling with 4-decimal prints, then `0.3917` on three epochs in a row (27-29)."""
    rng = random.Random(4)
    recs = []
    for e in range(1, 41):
        v = 0.3917 if 27 <= e <= 29 else round(1.2 * 0.96 ** e + 0.05 + rng.gauss(0, 0.004), 4)
        values = {LOSS: v}
        ev = evals[e - 27] if 27 <= e <= 29 else round(0.8 + rng.gauss(0, 0.1), 4)
        if ev is not None:
            values["eval/loss"] = ev
        recs.append(StepRecord(e, values))
    return [f for f in of_type(replay_set(recs), "frozen_loss") if f.step == 27]


def test_a_train_print_repeated_while_the_eval_moves_is_a_coincidence() -> None:
    # wild-logs-5 (after the readers' fix read it): `Epoch 27/100 - Train Loss: 0.3917, ..., Validation Loss: 0.7969`,
    # 0.3917 again at 28 and 29 while validation went 0.5375, 0.8995: ERROR frozen_loss "nothing is learning"
    (f,) = _repeat([0.7969, 0.5375, 0.8995])
    assert f.severity == "info" and f.evidence["eval_moved"] is True, f


def test_a_train_print_repeated_with_the_eval_repeated_too_is_frozen() -> None:
    (f,) = _repeat([0.7969, 0.7969, 0.7969])
    assert f.severity == "error" and "eval_moved" not in f.evidence, f
