"""One record an epoch at the same count each time: CycleGAN prints `(epoch: 1, iters: 3648, time: ..)` at
each epoch's end (its print frequency the data set's size): the count says where in the epoch, the epoch
which one. Every line was read at step 3648: 20 epochs as one record."""

from __future__ import annotations

from pathlib import Path

import pytest

from stethoscope.importers.registry import read_any


@pytest.mark.parametrize("epochs", [20, 600])  # a short log (line by line) and a long one (learnt shapes)
def test_an_epochs_record_at_the_same_count_is_a_step_an_epoch_on(tmp_path: Path, epochs: int) -> None:
    lines = [f"(epoch: {e}, iters: 3648, time: 0.512, data: 0.004) D_A: 0.251 G_A: 0.512 cycle_A: {1 + 1 / e:.3f} "
             f"idt_A: 0.3" for e in range(1, epochs + 1)]
    path = tmp_path / "loss_log.txt"
    path.write_text("\n".join(lines) + "\n")
    c = read_any(path)[0].columns
    steps = sorted(set(c.steps))
    assert steps == [3648 * e for e in range(1, epochs + 1)]


def test_counts_that_move_within_epochs_are_unchanged(tmp_path: Path) -> None:
    lines = [f"(epoch: {e}, iters: {i}, time: 0.5, data: 0.0) D_A: 0.25 G_A: 0.5" for e in (1, 2) for i in (100, 200)]
    path = tmp_path / "loss_log.txt"
    path.write_text("\n".join(lines) + "\n")
    assert sorted(set(read_any(path)[0].columns.steps)) == [100, 200, 300, 400]


def test_a_training_round_counted_by_its_phase_word_is_the_epoch(tmp_path: Path) -> None:
    """A hand-written loop's `Train 3, loss: 2.05, train acc: 0.70` (DGCNN's train.log), with `Test 3, ..`
    after it: the count after `Train` is the epoch (the log was refused: 'metrics without a step counter')."""
    lines = []
    for e in range(6):
        lines.append(f"Train {e}, loss: {2.7 - 0.1 * e:.6f}, train acc: {0.45 + 0.05 * e:.6f}")
        lines.append(f"Test {e}, loss: {2.6 - 0.08 * e:.6f}, test acc: {0.5 + 0.04 * e:.6f}")
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    c = read_any(path)[0].columns
    assert [s for n, s in zip(c.names, c.steps) if n == "train/loss"] == list(range(6))
    assert [s for n, s in zip(c.names, c.steps) if n == "eval/loss"] == list(range(6))


def test_a_bar_described_train_is_no_training_round(tmp_path: Path) -> None:
    """`train:  6%|##  | 6/100 [...]` names a bar and its percentage, not round 6 (three logs of the sixth grammar
    part were misread by the first form of the rule above)."""
    lines = [f"train: {p:3d}%|##  | {p}/100 [00:01<00:10,  9.00it/s, loss={3 - p / 50:.3f}]" for p in range(1, 101)]
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    c = read_any(path)[0].columns
    steps = [s for n, s in zip(c.names, c.steps) if n == "train/loss"]
    assert steps == list(range(1, 101))
