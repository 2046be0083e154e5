"""A progress bar whose name says it counts other work than training (an evaluation's batches, checkpoint
shards loading, a dataset map) never gives training steps: in a log whose step lines nothing reads, its
count was taken as the step (`Evaluating: 24/100` read as steps 24, 26, 87)."""

from __future__ import annotations

import pytest

from stethoscope.importers import read_any
from stethoscope.records import LOSS
from tests.importers.series import series


def _log(tmp_path, bar: str) -> str:
    lines = []
    for k in range(12):
        lines.append(f"@@ {k} ~~ trn {3.0 - 0.1 * k:.3f} ~~")  # a shape no reader takes for a step line
        lines.append(bar.format(n=17 * k % 100))
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("bar", ["Evaluating:  {n}%|##        | {n}/100 [00:04<00:10, 9.4it/s]",
                                 "Validation DataLoader 0:  {n}%|##   | {n}/100 [00:04<00:10, 9.4it/s]",
                                 "Loading checkpoint shards:  {n}%|##  | {n}/100 [00:09<00:01,  1.89s/it]",
                                 "Map:  {n}%|##   | {n}/100 [00:01<00:00, 90.1 examples/s]"])
def test_a_bar_of_other_work_is_no_training_step(tmp_path, bar: str) -> None:
    runs = read_any(_log(tmp_path, bar))  # read, but no step in it: `diagnose` refuses it (exit 2)
    assert [len(run.points) for run in runs] == [0]


def test_a_training_bar_still_counts_steps(tmp_path) -> None:
    lines = [f"Epoch 0:  {k}%|##   | {k}/100 [00:04<00:10, 9.4it/s, loss={3.0 - 0.01 * k:.3f}]" for k in range(1, 60)]
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    (run,) = read_any(path)
    assert sorted(series(run, LOSS))[:3] == [1, 2, 3]
