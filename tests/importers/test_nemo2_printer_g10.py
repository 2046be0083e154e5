"""NeMo 2's progress printer: `reduced_train_loss` is the train loss (averaged over the data-parallel ranks)."""

from __future__ import annotations

from stethoscope.importers import read_any
from stethoscope.records import LOSS
from tests.importers.series import series

_LINE = ("Training epoch 0, iteration {i}/99 | lr: 1.5e-05 | consumed_samples: {c} | global_batch_size: 8 | "
         "global_step: {i} | reduced_train_loss: {v} | train_step_timing in s: 1.93\n")


def test_nemo2_reduced_train_loss_is_the_loss(write) -> None:
    text = "".join(_LINE.format(i=i, c=8 * (i + 1), v=f"{10.77 - i / 100:.2f}") for i in range(0, 40, 10))
    run = read_any(write("train.log", text))[0]
    assert series(run, LOSS) == {0: 10.77, 10: 10.67, 20: 10.57, 30: 10.47}
