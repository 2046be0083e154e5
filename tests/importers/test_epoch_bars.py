"""tqdm bars written through python `logging` (Keras' TqdmCallback): the batch bar starts over every epoch with no
`Epoch N:` before it, so each start is an epoch on; the outer bar counts epochs and its postfix holds the evals."""

from __future__ import annotations

import pytest

from stethoscope.importers.textlog import TextLogImporter
from stethoscope.records import EVAL_LOSS, LOSS
from tests.importers.series import series

PREFIX = "2025-06-14 22:57:{s:02d},981 - INFO - "


def _tqdm_through_logging(epochs: int, batches: int, val_losses: list[float]) -> str:
    out = [PREFIX.format(s=0) + f"0%|          | 0/{epochs} [00:00<?, ?epoch/s]"]
    for e in range(1, epochs + 1):
        for b in range(batches + 1):
            count = f"{b}.00" if b < 3 else f"{b}"  # tqdm's unit_scale: small counts as floats
            out.append(PREFIX.format(s=b) + f"{100 * b // batches}%|#   | {count}/{batches} [00:01<00:03, "
                       f"6.58batch/s, accuracy=0.{e}, loss={5 - 0.3 * e - 0.01 * b:.3g}]")
            out.append(PREFIX.format(s=b) + "[A")
        out += [PREFIX.format(s=59) + f"Epoch {e}: ", PREFIX.format(s=59) + f"loss={5 - 0.3 * e:.4f}, accuracy=0.{e}, ",
                PREFIX.format(s=59) + f"val_loss={val_losses[e - 1]:.4f}, val_accuracy=0.04",
                PREFIX.format(s=59) + f"{100 * e // epochs}%|#   | {e}/{epochs} [00:26<04:01, 26.86s/epoch, "
                f"accuracy=0.{e}, loss={5 - 0.3 * e:.3g}, val_accuracy=0.04, val_loss={val_losses[e - 1]:.3g}]"]
    return "\n".join(out) + "\n"


def test_a_batch_bar_that_starts_over_is_the_next_epoch(write) -> None:
    """Read before as the position within the epoch (steps 1..8, every epoch over the one before)."""
    run = TextLogImporter().read(write("train_log.txt", _tqdm_through_logging(4, 8, [4.36, 3.41, 2.97, 3.86])))
    loss = series(run, LOSS)
    assert sorted(loss) == list(range(1, 33))  # 4 epochs of 8 batches (the float counts 1.00, 2.00 included)
    assert loss[9] == pytest.approx(4.39)  # epoch 2's first batch
    assert series(run, EVAL_LOSS) == {8: 4.36, 16: 3.41, 24: 2.97, 32: 3.86}  # the epoch bar's evals


def test_a_bar_with_its_epoch_keeps_its_epoch(write) -> None:
    """Lightning's `Epoch 1:` bars restart too: their epoch says where (a guard: no epoch added twice)."""
    lines = [f"Epoch {e}: {100 * b // 4}%|#   | {b}/4 [00:01<00:03, 2.0it/s, loss={3 - 0.1 * (4 * e + b):.3g}]"
             for e in range(3) for b in range(1, 5)]
    run = TextLogImporter().read(write("train.log", "\n".join(lines) + "\n"))
    assert sorted(series(run, LOSS)) == list(range(1, 13))


def test_a_bar_counting_examples_never_sets_the_epoch_length(write) -> None:
    """TRL's SFTTrainer (2025) prints dicts with only a fractional epoch; a datasets bar over the 8,939 examples
    came first and was taken for the training bar: steps became epoch x 2,980 (x5.3) instead of the train bar's."""
    text = ("Adding EOS to train dataset:   0%|          | 0/900 [00:00<?, ? examples/s]"
            "Adding EOS to train dataset: 100%|##########| 900/900 [00:00<00:00, 58571.65 examples/s]\n")
    text += "\r".join(f"  {100 * n // 30}%|#   | {n}/30 [00:02<00:40,  1.80s/it]" for n in range(31)) + "\n"
    text += "".join(f"{{'loss': '{3.0 - 0.05 * n:.3f}', 'grad_norm': '0.77', 'epoch': '{n / 10:.4f}'}}\n"
                    for n in range(5, 31, 5))  # (tqdm's redraws all on the line above: the dicts come after them)
    run = TextLogImporter().read(write("train_log.txt", text))
    assert sorted(series(run, LOSS)) == [5, 10, 15, 20, 25, 30]
