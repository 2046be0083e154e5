"""A metrics table printed on the console row by row (skorch's epoch table)."""

from __future__ import annotations

import pytest

from stethoscope.detect.names import time_like
from stethoscope.importers import read_any
from stethoscope.records import EVAL_LOSS, LOSS
from tests.importers.series import names, series

SKORCH = ("Re-initializing module.\n"
          "  epoch    train_loss    valid_loss    cp     dur\n"
          "-------  ------------  ------------  ----  ------\n"
          "      1        \x1b[36m1.3300\x1b[0m        \x1b[32m1.2550\x1b[0m     +  0.0479\n"
          "      2        \x1b[36m1.1741\x1b[0m        \x1b[32m1.0764\x1b[0m     +  0.0409\n"
          "      3        1.2001        1.1002        0.0512\n"
          "/site-packages/skorch/net.py:12: UserWarning: something\n"
          "      4        \x1b[36m0.9001\x1b[0m        \x1b[32m0.9764\x1b[0m     +  0.0399\n")


def test_skorch_epoch_table_is_read_by_its_epoch_column(write) -> None:
    (run,) = read_any(write("train.log", SKORCH))
    assert run.format == "texttable"
    assert series(run, LOSS) == {1: 1.33, 2: 1.1741, 3: 1.2001, 4: 0.9001}  # epoch 3: a blank cp cell
    assert series(run, EVAL_LOSS)[4] == 0.9764
    assert series(run, "dur")[2] == 0.0409
    assert any("UserWarning" in line.text for line in run.lines)


def test_dur_reads_as_a_time() -> None:
    assert time_like("dur") == 0.0


def test_a_header_without_rows_is_no_table(write) -> None:
    (run,) = read_any(write("train.log", "epoch train_loss valid_loss\nstep 1: loss 2.5\nstep 2: loss 2.4\n"))
    assert run.format != "texttable"


def _ultralytics(epochs: int) -> str:
    """Ultralytics' training console as its trainer prints it: a header of `%11s` columns before every epoch,
    the epoch's row as the tqdm bar's description (`%11s` * 2 + `%11.4g` * 5), redrawn with `\\r`, then the
    validation's bar and its `all` row."""
    out = []
    for e in range(1, epochs + 1):
        out.append(("%11s" * 7) % ("Epoch", "GPU_mem", "box_loss", "cls_loss", "dfl_loss", "Instances", "Size"))
        box, cls, dfl = 1.6 - 0.02 * e, 3.2 - 0.05 * e, 1.5 - 0.01 * e
        out.append("".join(("\r" if i else "") + ("%11s" * 2 + "%11.4g" * 5) % (f"{e}/{epochs}", "4.12G", box, cls, dfl,
                                                                               10 + i, 640)
                           + f": {100 * i // 118:3d}%|███       | {i}/118 [00:03<00:10,  9.81it/s]"
                           for i in (0, 60, 118)))
        out.append(("%22s" + "%11s" * 6) % ("Class", "Images", "Instances", "Box(P", "R", "mAP50", "mAP50-95)")
                   + ": 100%|██████████| 8/8 [00:01<00:00,  5.12it/s]")
        out.append(("%22s" + "%11i" * 2 + "%11.3g" * 4) % ("all", 500, 2710, 0.6, 0.5, 0.55, 0.3))
    return "\n".join(out) + "\n"


def test_ultralytics_epoch_rows_under_their_bar_are_a_table_and_the_loss_is_the_sum_of_its_parts(write) -> None:
    """The console reader took `4.12G` for a key `g` holding box_loss and read no train loss ("too few to judge").
    The rows are a table: the step column is `Epoch` (any case) with an `N/T` count, the cells end where the
    bar begins, the last redraw of an epoch is its row, and a loss printed only in parts (`*_loss`, no total) is
    their sum, which is what the trainer optimises."""
    (run,) = read_any(write("train.log", _ultralytics(12)))
    assert run.format == "texttable"
    loss = series(run, LOSS)
    assert sorted(loss) == list(range(1, 13))
    assert loss[1] == pytest.approx(1.58 + 3.15 + 1.49) and loss[12] == pytest.approx(1.36 + 2.6 + 1.38)
    assert series(run, "box_loss")[12] == 1.36 and series(run, "Instances")[3] == 128  # the epoch's last redraw
    assert not {"g", "G"} & names(run)
