"""A diagnosis asks the table for the loss five times: the series is laid out once, shared read-only, and is the
same array a fresh read of the rows gives (values and steps, masked or not)."""

from __future__ import annotations

import numpy as np
import pytest

from stethoscope.diagnose.table import Table


def _table() -> Table:
    steps = np.arange(0, 50, 5, dtype=np.int64)
    values = np.arange(30, dtype=float).reshape(10, 3)
    present = np.ones((10, 3), dtype=bool)
    present[::3, 2] = False  # the third series is logged at some rows only
    return Table(["train/loss", "opt/lr", "eval/loss"], steps, values, present, None)


def test_a_series_is_laid_out_once_read_only_and_as_the_rows_say():
    t = _table()
    s, v = t.series("train/loss")
    assert t.series("train/loss")[1] is v and t.series("opt/lr")[0] is s  # shared: no copy per call
    assert s.tolist() == list(range(0, 50, 5)) and v.tolist() == [3.0 * i for i in range(10)]
    es, ev = t.series("eval/loss")
    assert es.tolist() == [5, 10, 20, 25, 35, 40] and ev.tolist() == [5.0, 8.0, 14.0, 17.0, 23.0, 26.0]
    assert t.series("grad/norm")[0].size == 0 and t.series("grad/norm")[0].dtype == np.int64
    for a in (s, v, es, ev):
        with pytest.raises(ValueError):  # a caller that changed one would change every later caller's
            a[0] = -1
    assert t.steps[0] == 0 and t.values[0, 0] == 0.0  # the table's own arrays stay writable, and apart
    t.steps[0] = 99
    assert s[0] == 0


def test_the_replay_screen_reads_the_same_shared_series():
    t = _table()
    rows, v = t._column("train/loss")
    assert v is t.series("train/loss")[1] and rows.tolist() == list(range(10)) and t._column("opt/lr")[0] is rows
    rows, v = t._column("eval/loss")  # logged at some rows: gathered, as before
    assert rows.tolist() == [1, 2, 4, 5, 7, 8] and v.tolist() == t.series("eval/loss")[1].tolist()
