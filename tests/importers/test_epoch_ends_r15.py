"""An epoch's summary numbered by its epoch among records counted within epochs (wild-logs-6 M1, readers-15).
PaddleViT: `Epoch[001/100], Step[0100/0196], Avg Loss: ..` (global 100; 196 + 100 in epoch 2) then `-----
Epoch[001/100], Train Loss: .., Train Acc: .., time: 173.49`, read at step 1, 2, 3 ..: before, each summary looked
like the counter starting over and the log was split into a "run" an epoch. Synthetic excerpt in that shape."""

from __future__ import annotations

import pytest

from stethoscope.importers import read_any
from stethoscope.records import LOSS
from tests.importers.series import series


def _paddle(epochs: int) -> str:
    out = ["2022-05-06 09:45:51,123 ----- Imagenet2012 val_dataset with 50000 images\n"]
    for e in range(1, epochs + 1):
        for s in (0, 100):
            out.append(f"2022-05-06 09:46:00,872 Epoch[{e:03d}/100], Step[{s:04d}/0196], "
                       f"Avg Loss: {1.0 - e / 50 + s / 10000:.4f}, Avg Acc: {0.79 + e / 100:.4f}\n")
        out.append(f"2022-05-06 09:48:48,645 ----- Epoch[{e:03d}/100], Train Loss: {1.0 - e / 50 + 0.02:.4f}, "
                   f"Train Acc: {0.75 + e / 100:.4f}, time: 173.49\n\n")
    return "".join(out)


def test_epoch_summaries_between_within_epoch_counters_are_at_the_epochs_end(write) -> None:
    runs = read_any(write("log_train.txt", _paddle(12)))
    assert len(runs) == 1  # was 12 runs of 2-3 records
    loss = series(runs[0], LOSS)
    assert loss[196 + 100] == pytest.approx(1.0 - 2 / 50 + 0.01)  # epoch 2's Step[0100]: global
    assert loss[195] == pytest.approx(1.0 - 1 / 50 + 0.02)  # epoch 1's summary: its last step
    assert max(loss) == 12 * 196 - 1 and min(loss) == 0


def test_one_record_numbered_by_its_epoch_is_left_where_it_is(write) -> None:
    """A single such record is no ladder of summaries: the reading is as before."""
    text = _paddle(6)
    lines = text.splitlines(keepends=True)
    kept = [ln for k, ln in enumerate(lines) if "-----" not in ln or "Epoch[003" in ln]
    runs = read_any(write("log_train.txt", "".join(kept)))
    assert 3 in series(runs[0], LOSS) or len(runs) > 1
