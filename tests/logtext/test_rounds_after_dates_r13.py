"""A boosting round (`1000:\t`, `[1000]\t`) after a launcher's name and a date: the date's digits count nothing."""

from __future__ import annotations

import pytest

from stethoscope.records import LOSS
from tests.importers.series import read_text, series


def _catboost(step: int, loss: float) -> str:  # CatBoost's verbose line behind a pod's name and a logger's date
    return (f"worker-0: [24/07/2024 11:{step // 100 % 60:02d}:00] [trainer:INFO] {step}:\tlearn: {loss:.7f}\t"
            f"test: {loss + 0.01:.7f}\tbest: {loss + 0.01:.7f} ({step})\ttotal: 57.0ms\tremaining: 3.13s")


def test_a_round_after_a_date_is_the_step() -> None:
    losses = {step: 0.6 + step % 700 / 1000 for step in range(0, 1400, 100)}
    run = read_text("".join(_catboost(s, v) + "\n" for s, v in losses.items()))
    got = series(run, LOSS)
    assert sorted(got) == sorted(losses)
    assert got[500] == pytest.approx(losses[500])


def test_a_count_before_the_tab_still_makes_it_a_position_within_it() -> None:
    """SwAV's `Epoch: [0][50]\tTime ..`: the `[50]` is the batch within epoch 0, not a round of its own."""
    text = "".join(f"Epoch: [{e}][{b}]\tTime 0.512 (0.530)\tLoss 7.{b:03d} (7.100)\n" for e in range(3) for b in (0, 50, 100))
    assert 50 not in series(read_text(text), LOSS)  # (read by epoch, as before this rule)
