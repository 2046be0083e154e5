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


def _old_padded(v: np.ndarray, size: int) -> np.ndarray:
    out = np.full(size, np.nan)  # the old lay-out: always a fresh, NaN-filled copy
    out[:v.size] = v
    return out


@pytest.mark.parametrize("n", [320, 321, 351, 64_000, 64_017])
def test_the_screen_pads_only_a_part_block_and_finds_the_same_jumps(n, monkeypatch):
    from stethoscope.detect.config import DetectConfig
    from stethoscope.diagnose import table as table_mod

    rng = np.random.default_rng(n)
    values = 3 + rng.normal(0, 0.05, (n, 3)).cumsum(axis=0) * 0.01 + rng.normal(0, 0.02, (n, 3))
    values[rng.integers(0, n, 12), 0] *= 3  # jumps
    if n % 2:
        values[rng.integers(0, n, 3), 1] = np.nan  # a series turned non-finite
    t = Table(["train/loss", "grad/norm", "perf/step_time_s"], np.arange(n, dtype=np.int64), values,
              np.ones((n, 3), dtype=bool), None)
    got = [t._jumps(name, 0.3, 4.0) for name in t.names] + [t.replay_rows(DetectConfig())]
    monkeypatch.setattr(table_mod, "_padded", _old_padded)
    t = Table(t.names, t.steps, values, t.present, None)
    want = [t._jumps(name, 0.3, 4.0) for name in t.names] + [t.replay_rows(DetectConfig())]
    bits = [[(a.dtype, a.tobytes()) for a in (x if isinstance(x, tuple) else (x,))] for x in got]
    assert bits == [[(a.dtype, a.tobytes()) for a in (x if isinstance(x, tuple) else (x,))] for x in want]
    assert got[0][1].size and (got[-1].size < n or n <= table_mod.DENSE_LIMIT)  # jumps; big logs decimated
