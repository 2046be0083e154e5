"""Every point stored once (store/packed.py, store/packer.py): sealed chunks and tail rows read back as the
rows they replace — through the `points`/`metrics` views, `series_arrays`, rewrites, resumes, rollbacks and
the conversion of stores written by version 1/2 (a `points` table holding every point)."""

from __future__ import annotations

import math
import sqlite3
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stethoscope.store import packed, packer
from stethoscope.store.db import RunStore, rank_path
from stethoscope.store.query import open_run

T0 = 1_700_000_000.0


def _rows(run, name):
    with open_run(run) as r:
        _, rows = r.query("SELECT step, value FROM points p JOIN series s ON s.id = p.series_id "
                          "WHERE s.name = ? ORDER BY step", (name,))
    return [s for s, _ in rows], [math.nan if v is None else v for _, v in rows]


def _same(a, b):
    return list(a[0]) == list(b[0]) and np.array_equal(np.array(a[1], float), np.array(b[1], float), equal_nan=True)


def _count(path, table):
    con = sqlite3.connect(path)
    try:
        return con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    finally:
        con.close()


def _write(path, points, pack=True):
    store = RunStore(path, t0=T0, pack=pack)
    store.write_points(points)
    store.close()


@pytest.mark.parametrize("steps", [range(5000), range(0, 50_000, 10), [i * i for i in range(3000)],
                                   [i * 40_000 for i in range(3000)]],
                         ids=["contiguous", "stride", "irregular", "wide"])
def test_series_reads_back_from_chunks_exactly_and_only_the_tail_is_rows(tmp_path, steps):
    values = [math.nan if i % 777 == 5 else math.sin(i) * 1e3 for i in range(len(steps))]
    times = [T0 + 0.25 * i + (30.0 if i % 500 == 7 else 0.0) if i % 333 != 4 else None for i in range(len(steps))]
    points = [("train/loss", s, v, t) for s, v, t in zip(steps, values, times)]
    _write(rank_path(tmp_path / "packed", 0), points)
    _write(rank_path(tmp_path / "rows", 0), points, pack=False)
    path = rank_path(tmp_path / "packed", 0)
    assert _count(path, "points_tail") == 0 and _count(path, "points_packed") >= 1  # one write: all sealed
    assert _count(rank_path(tmp_path / "rows", 0), "points_packed") == 0
    with open_run(tmp_path / "packed") as r:
        x, y = r.series_arrays("train/loss")
        got = r.query("SELECT step, name, value, time FROM metrics ORDER BY step")[1]
        raw = r.query("SELECT series_id, step, time_ms, value FROM points ORDER BY step")[1]
    with open_run(tmp_path / "rows") as r:
        want = r.query("SELECT step, name, value, time FROM metrics ORDER BY step")[1]
        want_raw = r.query("SELECT series_id, step, time_ms, value FROM points ORDER BY step")[1]
    assert got == want and raw == want_raw  # the same rows, NULL times and NaN-as-NULL included
    assert sum(t is None for *_, t in got) == sum(t is None for t in times) > 0
    assert x.dtype == np.int64 and y.dtype == np.float64
    assert _same((x, y), (list(steps), values))


def test_a_slow_series_stays_rows_until_a_chunk_fills(tmp_path):
    path = rank_path(tmp_path, 0)
    store = RunStore(path, t0=T0)
    for s in range(packed.MIN_CHUNK - 1):
        store.write_points([("m", s, float(s), T0 + s)])
    assert _count(path, "points_tail") == packed.MIN_CHUNK - 1 and _count(path, "points_packed") == 0
    store.write_points([("m", packed.MIN_CHUNK - 1, 1.0, T0)])
    store.close()
    assert _count(path, "points_tail") == 0 and _count(path, "points_packed") == 1
    assert open_run(tmp_path).series("m")[0] == list(range(packed.MIN_CHUNK))


def test_rewrite_inside_a_sealed_chunk_reads_the_new_values_and_keeps_the_old(tmp_path):
    path = rank_path(tmp_path, 0)
    _write(path, [("train/loss", s, float(s), T0 + s) for s in range(4000)])
    store = RunStore(path)  # a resume: a new writer, nothing primed
    store.write_points([("train/loss", s, -1.0, T0 + 9000) for s in range(1500, 1600)])  # re-recorded
    store.write_points([("train/loss", 4000, 4000.0, None)])
    store.close()
    with open_run(tmp_path) as r:
        steps, values = r.series("train/loss")
        _, old = r.query("SELECT step, value, time_ms FROM points_superseded ORDER BY step")
        _, new_t = r.query("SELECT time_ms FROM points WHERE step = 1550")
    assert steps == list(range(4001))
    assert values[1499] == 1499.0 and values[1500:1600] == [-1.0] * 100 and values[1600] == 1600.0
    assert old == [(s, float(s), s * 1000) for s in range(1500, 1600)]  # the old values with their times
    assert new_t == [(9_000_000,)]
    assert _same((steps, values), _rows(tmp_path, "train/loss"))
    assert _count(path, "points_tail") == 1  # the reopened chunk was packed again: rows only for the tail


def _v1_store(path, n):
    """A rank file as version 1 wrote it: a `points` table holding every point, no chunks."""
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE run (key TEXT PRIMARY KEY, value TEXT);
        CREATE TABLE series (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, unit TEXT NOT NULL DEFAULT '');
        CREATE TABLE points (series_id INTEGER NOT NULL, step INTEGER NOT NULL, time_ms INTEGER, value REAL,
                             PRIMARY KEY (series_id, step)) WITHOUT ROWID;
        CREATE TABLE events (id INTEGER PRIMARY KEY, step INTEGER, time REAL, kind TEXT NOT NULL,
                             severity TEXT NOT NULL DEFAULT 'info', source TEXT NOT NULL DEFAULT '',
                             message TEXT NOT NULL DEFAULT '', data TEXT);
        CREATE VIEW metrics AS SELECT p.step AS step, s.name AS name, p.value AS value,
            (SELECT CAST(value AS REAL) FROM run WHERE key = 't0') + p.time_ms / 1000.0 AS time
            FROM points p JOIN series s ON s.id = p.series_id;
        INSERT INTO run VALUES ('t0', '1700000000.0'), ('schema_version', '1');
        INSERT INTO series (name) VALUES ('a'), ('b');
    """)
    con.executemany("INSERT INTO points VALUES (?, ?, ?, ?)",
                    [(k, s, s * 10 if s % 7 else None, None if s % 11 == 3 else s * 0.5 + k)
                     for s in range(n) for k in (1, 2)])
    con.commit()
    con.close()


def test_an_older_store_is_read_as_it_is_and_stored_once_when_opened_for_writing(tmp_path):
    path = rank_path(tmp_path, 0)
    _v1_store(path, 3000)
    query = "SELECT step, name, value, time FROM metrics ORDER BY name, step"
    with open_run(tmp_path) as r:  # readers never write: the old table is read as it is
        before = r.query(query)[1]
        a_before = r.series_arrays("a")
    assert len(before) == 6000
    RunStore(path).close()
    con = sqlite3.connect(path)
    assert con.execute("SELECT type FROM sqlite_master WHERE name = 'points'").fetchone()[0] == "view"
    assert con.execute("SELECT value FROM run WHERE key = 'schema_version'").fetchone()[0] == "3"
    con.close()
    assert _count(path, "points_tail") == 0 and _count(path, "points_packed") == 2
    with open_run(tmp_path) as r:
        assert r.query(query)[1] == before
        assert _same(r.series_arrays("a"), a_before)
    RunStore(path).close()  # a second open finds it converted and changes nothing
    with open_run(tmp_path) as r:
        assert r.query(query)[1] == before


def test_a_step_that_is_not_an_int_is_kept_as_a_row_and_nothing_is_lost(tmp_path):
    store = RunStore(rank_path(tmp_path, 0))
    store.write_points([("m", s, float(s), None) for s in range(3000)])
    store.write_points([("m", 3000.5, 1.0, None), ("m", 3001, 2.0, None)])  # not an int: stored as given
    store.write_points([("m", 10, -1.0, None)])  # a rewrite inside a chunk
    store.write_points([("m", s, float(s), None) for s in range(3002, 3400)])
    store.close()
    with open_run(tmp_path) as r:
        _, rows = r.query("SELECT step, value FROM points ORDER BY step")
    assert len(rows) == 3400 and rows[10] == (10, -1.0) and rows[3000:3002] == [(3000.5, 1.0), (3001, 2.0)]


def test_a_rollback_reopens_the_chunks_of_the_abandoned_steps(tmp_path):
    """`supersede` (a rollback) moves steps 2500.. out of `points` into `points_superseded`; the path that
    continued reads back, and later writes pack it again."""
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
        _, old = r.query("SELECT MIN(step), MAX(step), COUNT(*), SUM(value) FROM points_superseded")
    assert old == [(2500, 3999, 1500, float(sum(range(2500, 4000))))]
    assert _same((x, y), want)
    assert _count(path, "points_tail") < packed.MIN_CHUNK + 2500  # the reopened head stays rows, the rest packed


writes = st.lists(st.tuples(st.integers(0, 60), st.integers(1, 12), st.sampled_from(["write", "reopen", "rollback"])),
                  min_size=1, max_size=25)


@settings(max_examples=40, deadline=None)
@given(writes=writes)
def test_any_sequence_of_writes_rewrites_reopens_and_rollbacks_reads_back_as_a_model(tmp_path_factory, writes):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(packer, "MIN_CHUNK", 3)  # many chunks, many seals and rewrites across them
        mp.setattr(packer, "MAX_CHUNK", 5)
        _writes_read_back(tmp_path_factory.mktemp("run"), writes)


def _writes_read_back(run, writes):
    path = rank_path(run, 0)
    store = RunStore(path, t0=T0)
    model: dict[int, float] = {}
    old: list[float] = []
    for n, (start, count, op) in enumerate(writes):
        if op == "reopen":
            store.close()
            store = RunStore(path)
        if op == "rollback":
            old += [v for s, v in model.items() if s >= start]
            model = {s: v for s, v in model.items() if s < start}
            store.supersede(start, 10**6, n)
            continue
        batch = [("m", s, float(n * 1000 + s) if s % 13 else math.nan, T0 + n) for s in range(start, start + count)]
        old += [model[s] for _, s, _, _ in batch if s in model]
        model.update({s: v for _, s, v, _ in batch})
        store.write_points(batch)
    store.close()
    want = (sorted(model), [model[s] for s in sorted(model)])
    with open_run(run) as r:
        assert _same(r.series("m"), want)
        assert _same(_rows(run, "m"), want)
        _, sup = r.query("SELECT value FROM points_superseded")
    assert sorted(np.nan_to_num([math.nan if v is None else v for v, in sup], nan=-1)) == \
        sorted(np.nan_to_num(old, nan=-1))


def test_bytes_per_point_of_a_long_series(tmp_path):
    """~10 bytes a point (a float64 and a narrow time residual), where the rows took ~20 and rows plus
    version 2's copies ~33."""
    path = rank_path(tmp_path, 0)
    store = RunStore(path, t0=T0)
    for k in range(0, 200_000, 20_000):
        store.write_points([(f"m/{i}", s, math.sin(s + i), T0 + s * 0.3) for s in range(k, k + 2000) for i in range(10)])
    store.close()
    assert path.stat().st_size / 200_000 <= 12


def test_the_summary_read_from_arrays_gives_what_the_sql_over_metrics_gives(tmp_path):
    """`stethoscope show` reads each series as arrays (a full scan of the views unpacks every chunk through
    SQL functions): the numbers equal the SQL aggregates it used to run."""
    from stethoscope import records as R
    from stethoscope.store.summary import summarize

    store = RunStore(rank_path(tmp_path, 0), t0=T0)
    store.write_points([(R.LOSS, s, math.nan if s % 50 == 3 else 5.0 - s / 1000, T0 + s) for s in range(3000)]
                       + [(R.STEP_TIME, s, 0.1 + (s % 7) / 100, T0 + s) for s in range(0, 3000, 3)]
                       + [(R.RSS, s, float(s % 11), T0 + s + 0.5) for s in range(3100)])
    store.close()
    with open_run(tmp_path) as r:
        got = summarize(r)

        def one(sql, *args):
            return r.query(sql, args)[1][0][0]

        assert got["last_step"] == one("SELECT MAX(step) FROM metrics") == 3099
        assert got["logged_steps"] == one("SELECT COUNT(DISTINCT step) FROM metrics") == 3100  # any record
        assert got["min_loss"] == one("SELECT MIN(value) FROM metrics WHERE name = ?", R.LOSS)
        assert got["last_loss"] == one("SELECT value FROM metrics WHERE name = ? ORDER BY step DESC LIMIT 1", R.LOSS)
        assert got["peak_rss_gib"] == one("SELECT MAX(value) FROM metrics WHERE name = ?", R.RSS) == 10.0
        rows = r.query("SELECT value FROM metrics WHERE name = ? AND value IS NOT NULL ORDER BY value", (R.STEP_TIME,))[1]
        assert got["step_time_s"] == rows[len(rows) // 2][0]
        assert r.last_time() == one("SELECT MAX(time) FROM metrics") == T0 + 3099.5


def test_the_live_tail_buckets_the_arrays_as_sqlite_bucketed_the_rows(tmp_path):
    """`stethoscope watch` buckets a curve with numpy over the packed series: the same means, NaN buckets,
    lows, highs and last point as the SQL aggregate over `points` it ran before."""
    from stethoscope.store import tail

    path = rank_path(tmp_path, 0)
    store = RunStore(path, t0=T0)
    store.write_points([("train/loss", s, math.nan if s % 97 == 5 else math.cos(s / 50), T0 + s / 4)
                        for s in range(0, 9000, 3)])
    store.close()
    conn = tail.arrow.connect(path)
    try:
        lo, hi, width = 0, 8997, 60
        rows = conn.execute(
            "SELECT (step - ?) * ? / (? - ? + 1) AS b, AVG(value), SUM(value IS NULL), MIN(value), MAX(value) "
            "FROM points WHERE series_id = 1 GROUP BY b ORDER BY b", (lo, width, hi, lo)).fetchall()
        curve = tail._curve(conn, "train/loss", 1, "", width)
        rate = tail._rate(conn, 1, T0)
    finally:
        conn.close()
    want = [math.nan if nans else mean for _, mean, nans, _, _ in rows]
    assert len(curve.buckets) == width and all(b is not None for b in curve.buckets)
    assert np.allclose(np.array(curve.buckets, float), np.array(want, float), equal_nan=True, rtol=1e-12)
    assert curve.low == min(r[3] for r in rows) and curve.high == max(r[4] for r in rows)
    assert (curve.last_step, curve.points) == (8997, 3000) and curve.last == math.cos(8997 / 50)
    assert rate == (pytest.approx(4.0), T0 + 8997 / 4)


def test_a_damaged_chunk_is_found_by_its_checksum_and_the_rank_is_left_out(tmp_path):
    """Bytes changed inside a chunk's blob pass SQLite's page checks; the chunk's CRC-32 catches them: the
    arrays read names the file, and a query over `metrics` leaves that rank out and answers from the rest."""
    from stethoscope.errors import NotARunError

    for rank in range(2):
        _write(rank_path(tmp_path, rank), [("train/loss", s, float(rank), None) for s in range(5000)])
    con = sqlite3.connect(rank_path(tmp_path, 1))
    vals = bytearray(con.execute("SELECT vals FROM points_packed").fetchone()[0])
    vals[800:808] = struct.pack("<d", 123.0)
    con.execute("UPDATE points_packed SET vals = ?", (bytes(vals),))  # what a flipped disk block would do
    con.commit()
    con.close()
    with open_run(tmp_path) as r:
        with pytest.raises(NotARunError, match="rank-00001.sqlite.*checksum"):
            r.series_arrays("train/loss", rank=1)
        assert r.query("SELECT rank, COUNT(*), MAX(value) FROM metrics GROUP BY rank")[1] == [(0, 5000, 0.0)]
        assert r.ranks == [0] and any("rank-00001" in s and "checksum" in s for s in r.skipped)


@pytest.mark.parametrize("periodic", [True, False], ids=["same-names-each-step", "mixed"])
def test_a_batch_of_many_series_with_rewrites_reads_back_as_written(tmp_path, periodic):
    """The writer groups a batch by series (strided when every step logs the same names in the same order,
    sorted otherwise); steps written again in the batch keep their old values in `points_superseded`."""
    names = ["a", "b", "c"]

    def batch(lo, hi, k):
        pts = [(n, s, float(s * 10 + i + k), T0 + s) for s in range(lo, hi) for i, n in enumerate(names)]
        return pts if periodic else pts[::-1][:1] + pts[:-1]  # one point out of order: not periodic

    store = RunStore(rank_path(tmp_path, 0), t0=T0)
    store.write_points(batch(0, 1000, 0))
    store.write_points(batch(500, 1500, 100_000))  # a resume: steps 500..999 again
    store.close()
    with open_run(tmp_path) as r:
        for i, n in enumerate(names):
            x, y = r.series_arrays(n)
            assert x.tolist() == list(range(1500))
            assert y.tolist() == [float(s * 10 + i + (100_000 if s >= 500 else 0)) for s in range(1500)]
        _, old = r.query("SELECT COUNT(*), SUM(value) FROM points_superseded")
    assert old == [(1500, float(sum(s * 10 + i for s in range(500, 1000) for i in range(3))))]
