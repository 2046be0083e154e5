from __future__ import annotations

import math
import sqlite3
import time

import pytest

from stethoscope.errors import NotARunError, QueryRefused
from stethoscope.records import Finding
from stethoscope.store.db import RunStore, rank_path
from stethoscope.store import packed
from stethoscope.store.query import open_run


def _store(run, rank=0):
    return RunStore(rank_path(run, rank))


def test_round_trip_points_events_meta(tmp_path):
    s = _store(tmp_path)
    t = time.time()
    s.write_points([("train/loss", i, 4.0 - i / 10, t + i) for i in range(20)] + [("eval/loss", 10, 3.5, None)])
    s.write_findings([Finding("loss_spike", "warning", 7, "spike", evidence={"ratio": 3.0, "x": math.nan})])
    s.write_batches([(7, [11, 12, 13])])
    s.set_meta({"config": {"lr": 3e-4}, "host": "h"})
    s.close()
    with open_run(tmp_path) as r:
        steps, values = r.series("train/loss")
        assert steps == list(range(20))
        assert values[3] == pytest.approx(3.7)
        _, rows = r.query("SELECT time FROM metrics WHERE name = 'train/loss' AND step = 5")
        assert rows[0][0] == pytest.approx(t + 5, abs=0.002)
        _, rows = r.query("SELECT time FROM metrics WHERE name = 'eval/loss'")
        assert rows == [(None,)]
        _, rows = r.query("SELECT type, severity, step, json_extract(data, '$.evidence.x') FROM findings")
        assert rows == [("loss_spike", "warning", 7, "nan")]
        assert r.query("SELECT ids FROM batches WHERE step = 7")[1] == [("[11, 12, 13]",)]
        assert r.meta()["host"] == "h"


def test_rerecorded_step_is_superseded_not_lost(tmp_path):
    s = _store(tmp_path)
    s.write_points([("train/loss", i, float(i), None) for i in range(10)])
    s.write_points([("train/loss", i, 100.0 + i, None) for i in range(5, 8)])  # rollback re-records 5..7
    s.close()
    with open_run(tmp_path) as r:
        _, values = r.series("train/loss")
        assert values[5:8] == [105.0, 106.0, 107.0] and values[8] == 8.0
        _, old = r.query("SELECT step, value FROM points_superseded ORDER BY step")
        assert old == [(5, 5.0), (6, 6.0), (7, 7.0)]


def test_reopened_store_appends_and_keeps_t0(tmp_path):
    s = _store(tmp_path)
    t0 = s.t0
    s.write_points([("train/loss", 1, 1.0, None)])
    s.close()
    s = _store(tmp_path)
    assert s.t0 == t0
    s.write_points([("train/loss", 1, 2.0, None), ("train/loss", 2, 3.0, None)])
    s.close()
    with open_run(tmp_path) as r:
        assert r.series("train/loss") == ([1, 2], [2.0, 3.0])


def test_multi_rank_files_read_as_one_view(tmp_path):
    for rank in range(3):
        s = _store(tmp_path, rank)
        s.write_points([("perf/step_time_s", i, 0.1 * (rank + 1), None) for i in range(4)])
        s.close()
    with open_run(tmp_path) as r:
        assert r.ranks == [0, 1, 2]
        _, rows = r.query("SELECT rank, COUNT(*), AVG(value) FROM metrics GROUP BY rank ORDER BY rank")
        assert [(a, b) for a, b, _ in rows] == [(0, 4), (1, 4), (2, 4)]
        assert rows[2][2] == pytest.approx(0.3)
        assert r.series("perf/step_time_s", rank=1)[1] == [pytest.approx(0.2)] * 4


@pytest.mark.parametrize("sql", [
    "DELETE FROM points", "INSERT INTO run VALUES ('a', 'b')", "UPDATE run SET value = 1",
    "DROP TABLE r0.points", "CREATE TABLE x (a)", "ATTACH DATABASE '/tmp/x.db' AS x", "DETACH DATABASE r0",
    "PRAGMA query_only = OFF", "PRAGMA r0.journal_mode = DELETE", "SELECT 1; DELETE FROM points",
])
def test_user_sql_cannot_write_attach_or_pragma(tmp_path, sql):
    s = _store(tmp_path)
    s.write_points([("train/loss", 0, 1.0, None)])
    s.close()
    with open_run(tmp_path) as r:
        with pytest.raises(QueryRefused):
            r.query(sql)
        assert r.series("train/loss") == ([0], [1.0])
    con = sqlite3.connect(rank_path(tmp_path, 0))
    packed.register(con)  # the `points` view unpacks the chunks with these (a plain shell reads points_tail)
    assert con.execute("SELECT COUNT(*) FROM points").fetchone() == (1,)
    con.close()


def test_not_a_run(tmp_path):
    with pytest.raises(NotARunError, match="no such file"):
        open_run(tmp_path / "missing")
    with pytest.raises(NotARunError, match="not a stethoscope run"):
        open_run(tmp_path)
    (tmp_path / "rank-00000.sqlite").write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(NotARunError, match="not a readable stethoscope store"):
        open_run(tmp_path)


def test_foreign_sqlite_file_is_not_a_run(tmp_path):
    con = sqlite3.connect(tmp_path / "rank-00000.sqlite")
    con.execute("CREATE TABLE other (a)")
    con.commit()
    con.close()
    with pytest.raises(NotARunError, match="not a stethoscope store"):
        open_run(tmp_path)
