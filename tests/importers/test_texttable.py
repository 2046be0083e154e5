"""A metrics table printed on the console row by row (skorch's epoch table)."""

from __future__ import annotations

from stethoscope.detect.names import time_like
from stethoscope.importers import read_any
from stethoscope.records import EVAL_LOSS, LOSS
from tests.importers.series import series

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
