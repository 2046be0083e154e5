"""Packed chunks (store/packed.py): a series read from them equals its rows, through writes, rewrites,
resumes and the migration of stores written before the chunks existed."""

from __future__ import annotations

import math
import sqlite3

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stethoscope.store import packed
from stethoscope.store.db import RunStore, rank_path
from stethoscope.store.query import open_run


def _rows(run, name):
    with open_run(run) as r:
        _, rows = r.query("SELECT step, value FROM points p JOIN series s ON s.id = p.series_id "
                          "WHERE s.name = ? ORDER BY step", (name,))
    return [s for s, _ in rows], [math.nan if v is None else v for _, v in rows]


def _same(a, b):
    return a[0] == b[0] and np.array_equal(np.array(a[1], float), np.array(b[1], float), equal_nan=True)


def _chunks(path):
    con = sqlite3.connect(path)
    try:
        return con.execute("SELECT COUNT(*) FROM points_packed").fetchone()[0]
    finally:
        con.close()


@pytest.mark.parametrize("steps", [range(5000), range(0, 50_000, 10), [i * i for i in range(3000)]],
                         ids=["contiguous", "stride", "irregular"])
def test_series_reads_back_from_chunks_exactly(tmp_path, steps):
    store = RunStore(rank_path(tmp_path, 0))
    values = [math.nan if i % 777 == 5 else math.sin(i) * 1e3 for i in range(len(steps))]
    store.write_points([("train/loss", s, v, None) for s, v in zip(steps, values)])
    store.close()
    assert _chunks(rank_path(tmp_path, 0)) == len(steps) // packed.CHUNK  # sealed; the tail stays as rows
    with open_run(tmp_path) as r:
        got = r.series("train/loss")
        x, y = r.series_arrays("train/loss")
    assert got[0] == list(steps)
    assert _same(got, (list(steps), values))
    assert x.dtype == np.int64 and y.dtype == np.float64 and len(x) == len(steps)


def test_rewrite_inside_a_sealed_chunk_reads_the_new_values_and_keeps_the_old(tmp_path):
    store = RunStore(rank_path(tmp_path, 0))
    store.write_points([("train/loss", s, float(s), None) for s in range(4000)])
    store.close()
    store = RunStore(rank_path(tmp_path, 0))  # a resume: a new writer, nothing primed
    store.write_points([("train/loss", s, -1.0, None) for s in range(1500, 1600)])  # a rollback re-records these
    store.write_points([("train/loss", 4000, 4000.0, None)])
    store.close()
    with open_run(tmp_path) as r:
        steps, values = r.series("train/loss")
        _, old = r.query("SELECT COUNT(*) FROM points_superseded")
    assert steps == list(range(4001))
    assert values[1499] == 1499.0 and values[1500:1600] == [-1.0] * 100 and values[1600] == 1600.0
    assert old[0][0] == 100
    assert _same((steps, values), _rows(tmp_path, "train/loss"))


def test_a_store_without_chunks_is_packed_on_open_for_writing_and_loses_nothing(tmp_path):
    path = rank_path(tmp_path, 0)
    store = RunStore(path, pack=False)
    store.write_points([(n, s, s * 0.5 + k, None) for s in range(3000) for k, n in enumerate(("a", "b"))])
    store.close()
    con = sqlite3.connect(path)  # as a store of schema version 1 was: no points_packed table
    con.execute("DROP TABLE points_packed")
    con.execute("UPDATE run SET value = '1' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    before = _rows(tmp_path, "a"), _rows(tmp_path, "b")
    with open_run(tmp_path) as r:  # readers never write: an old store is read row by row
        assert _same(r.series("a"), before[0])
    RunStore(path).close()
    assert _chunks(path) == 2 * (3000 // packed.CHUNK)
    con = sqlite3.connect(path)
    assert con.execute("SELECT value FROM run WHERE key = 'schema_version'").fetchone()[0] == "2"
    assert con.execute("SELECT COUNT(*) FROM points").fetchone()[0] == 6000
    con.close()
    with open_run(tmp_path) as r:
        assert _same(r.series("a"), before[0]) and _same(r.series("b"), before[1])
    RunStore(path).close()  # a second open finds it packed and changes nothing
    assert _chunks(path) == 2 * (3000 // packed.CHUNK)


writes = st.lists(st.tuples(st.integers(0, 60), st.integers(1, 12), st.booleans()), min_size=1, max_size=25)


@settings(max_examples=40, deadline=None)
@given(writes=writes)
def test_any_sequence_of_writes_rewrites_and_reopens_reads_back_as_its_rows(tmp_path_factory, writes, monkeypatch_chunk):
    run = tmp_path_factory.mktemp("run")
    path = rank_path(run, 0)
    store = RunStore(path)
    for n, (start, count, reopen) in enumerate(writes):
        if reopen:
            store.close()
            store = RunStore(path)
        store.write_points([("m", s, float(n * 1000 + s) if s % 13 else math.nan, None)
                            for s in range(start, start + count)])
    store.close()
    with open_run(run) as r:
        assert _same(r.series("m"), _rows(run, "m"))


@pytest.fixture(scope="module")
def monkeypatch_chunk():
    mp = pytest.MonkeyPatch()
    mp.setattr(packed, "CHUNK", 4)  # many chunks, many seals and rewrites across them
    yield
    mp.undo()


def test_a_step_the_packer_cannot_hold_keeps_the_rows_and_drops_the_chunks(tmp_path):
    store = RunStore(rank_path(tmp_path, 0))
    store.write_points([("m", s, float(s), None) for s in range(3000)])
    store.write_points([("m", 3000.5, 1.0, None), ("m", 3001, 2.0, None)])  # not an int: stored as given
    store.write_points([("m", 10, -1.0, None)])  # a rewrite no packer sees: no chunk may hide it
    store.close()
    assert _chunks(rank_path(tmp_path, 0)) == 0
    steps, values = open_run(tmp_path).series("m")
    assert len(steps) == 3002 and values[10] == -1.0 and values[-2:] == [1.0, 2.0]  # nothing lost


def test_a_rollback_drops_the_chunks_of_the_abandoned_steps(tmp_path):
    """`supersede` (a rollback) moves steps 2500.. out of `points`: the chunks holding them go too, the
    packed read gives the path that continued, and later writes pack it again."""
    path = rank_path(tmp_path, 0)
    store = RunStore(path)
    store.write_points([("train/loss", s, float(s), None) for s in range(4000)])
    store.supersede(2500, 3999, 1)
    store.write_points([("train/loss", s, -float(s), None) for s in range(2500, 6000)])  # the new path
    store.close()
    want = (list(range(6000)), [float(s) for s in range(2500)] + [-float(s) for s in range(2500, 6000)])
    assert _same(_rows(tmp_path, "train/loss"), want)
    with open_run(tmp_path) as r:
        x, y = r.series_arrays("train/loss")
        assert [tuple(t) for t in r.superseded()] == [(2500, 3999, 1, None)]
    assert _same((x.tolist(), y.tolist()), want)
    assert _chunks(path) == 6000 // packed.CHUNK
