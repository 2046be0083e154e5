"""A stethoscope run read for diagnosis from its packed chunks gives the table and the findings that reading
every row gives (the rows path stays for stores without chunks)."""

from __future__ import annotations

import math
import random

import numpy as np

from stethoscope.diagnose import sources
from stethoscope.diagnose.engine import diagnose_run
from stethoscope.diagnose.table import Table
from stethoscope.importers.base import ImportedRun
from stethoscope.store.db import RunStore, rank_path
from stethoscope.store.query import open_run


def _run(path, t0=1_700_000_000.0):
    rng = random.Random(3)
    s = RunStore(rank_path(path, 0), t0=t0)
    loss = [2.0 * math.exp(-i / 900) + rng.gauss(0, 0.01) for i in range(3000)]
    loss[2000:2004] = [9.0, 8.0, 6.5, 5.0]  # a spike
    loss[777] = math.nan
    s.write_points((("train/loss", i, v, t0 + i * 0.3) for i, v in enumerate(loss)))
    s.write_points((("opt/lr", i, 3e-4, t0 + i * 0.3) for i in range(0, 3000)))
    s.write_points((("eval/loss", i, 2.0 * math.exp(-i / 900) + 0.05, t0 + i * 0.3 + 1) for i in range(100, 3000, 100)))
    s.write_points((("train/loss", i, loss[i] + 0.001, t0 + 5000) for i in range(1500, 1510)))  # a resume rewrote these
    s.close()


def test_packed_and_row_reads_give_the_same_table_and_findings(tmp_path):
    _run(tmp_path)
    with open_run(tmp_path) as r:
        packed = sources.from_store(r)
        rows = sources._row_columns(r, 0)
        assert sources._packed_columns(r, 0) is not None  # the chunks were used
    a, b = Table.from_columns(packed.columns), Table.from_columns(rows)
    assert a.names == b.names and np.array_equal(a.steps, b.steps) and a.last_time == b.last_time
    assert np.array_equal(a.values, b.values, equal_nan=True) and np.array_equal(a.present, b.present)
    by_rows = ImportedRun(packed.path, packed.format, None, packed.meta, [], packed.lines, columns=rows)
    found = [(f.type, f.step, f.severity) for f in diagnose_run(packed).findings]
    assert found == [(f.type, f.step, f.severity) for f in diagnose_run(by_rows).findings]
    assert ("loss_spike", 2000) in [(t, s) for t, s, _ in found]


def test_a_store_without_chunks_is_read_by_rows(tmp_path):
    s = RunStore(rank_path(tmp_path, 0), pack=False)
    s.write_points([("train/loss", i, 1.0 / (i + 1), None) for i in range(50)])
    s.close()
    with open_run(tmp_path) as r:
        assert sources._packed_columns(r, 0) is None
        assert sources.from_store(r).columns.steps == list(range(50))
