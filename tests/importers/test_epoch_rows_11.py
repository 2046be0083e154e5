"""A table with no step column whose `epoch` column repeats (several rows an epoch, a custom CSV written every N
batches) was read with the row index from 0 as its step: `epoch,loss / 1,2.0 / 1,1.9 / 2,1.8` read "last step 2,
3 steps logged" (user-trial, bug 2). Its rows are records in the order they were logged, numbered 1, 2, 3 … as a
console's records without a step counter are; the epoch stays a series. Keras' CSVLogger (one row an epoch, the
epoch rising) keeps the epoch as its step, and a table with no epoch column keeps the row index."""

from __future__ import annotations

from stethoscope.importers import read_any
from stethoscope.logtext.names import EPOCH
from stethoscope.records import LOSS
from tests.importers.series import series


def test_rows_of_a_repeating_epoch_are_numbered_from_one(write) -> None:
    (run,) = read_any(write("metrics.csv", "epoch,loss\n1,2.0\n1,1.9\n2,1.8\n"))
    assert series(run, LOSS) == {1: 2.0, 2: 1.9, 3: 1.8}
    assert series(run, EPOCH) == {1: 1.0, 2: 1.0, 3: 2.0}
    assert "from 1" in run.meta["notes"]["step"]


def test_an_epoch_and_batch_table_is_one_record_a_row(write) -> None:
    """`epoch,batch,loss`, the batch starting over each epoch: the rows in order, 1..4, batch kept as a series."""
    (run,) = read_any(write("log.csv", "epoch,batch,loss\n0,0,2.0\n0,100,1.9\n1,0,1.8\n1,100,1.7\n"))
    assert series(run, LOSS) == {1: 2.0, 2: 1.9, 3: 1.8, 4: 1.7}


def test_a_rising_epoch_and_a_table_without_one_keep_their_steps(write) -> None:
    """Guards: Keras' CSVLogger (`epoch` from 0, one row each) and a table without an epoch column."""
    (keras,) = read_any(write("training.csv", "epoch,loss,val_loss\n0,2.0,2.1\n1,1.9,2.0\n2,1.8,1.9\n"))
    assert series(keras, LOSS) == {0: 2.0, 1: 1.9, 2: 1.8}
    (plain,) = read_any(write("plain.csv", "loss,accuracy\n2.0,0.1\n1.9,0.2\n1.8,0.3\n"))
    assert series(plain, LOSS) == {0: 2.0, 1: 1.9, 2: 1.8}
