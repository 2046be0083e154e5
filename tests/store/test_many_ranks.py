"""Runs with more rank files than SQLite can ATTACH (10) are read whole, never truncated."""

from __future__ import annotations

import json
import math
import shutil
import sqlite3

import pytest

from stethoscope.errors import QueryRefused
from stethoscope.records import Finding
from stethoscope.store.db import RunStore, rank_path
from stethoscope.store.query import open_run
from stethoscope.store.schema import RANKED
from tests.conftest import run_cli


def _steps(rank: int) -> int:
    return 3 + rank % 4  # a different count per rank, so a mixed-up rank shows


def _write_run(run, n_ranks):
    for rank in range(n_ranks):
        s = RunStore(rank_path(run, rank))
        s.write_points([("train/loss", step, rank * 100.0 + step, s.t0 + step) for step in range(_steps(rank))])
        s.write_points([("train/grad_norm", 0, math.nan if rank == 11 else 1.0, None)])
        if rank % 4 == 3:
            s.write_findings([Finding("loss_spike", "warning", rank, f"spike on rank {rank}")])
        s.write_events([(0, None, "lifecycle", "info", "test", f"start {rank}", {"rank": rank})])
        s.set_meta({"host": f"node-{rank}"})
        s.close()
    return run


@pytest.fixture(scope="module")
def run12(tmp_path_factory):
    return _write_run(tmp_path_factory.mktemp("run12"), 12)


@pytest.mark.parametrize("n_ranks", [12, 13])
def test_every_rank_is_read_past_the_attach_limit(tmp_path, n_ranks):
    with open_run(_write_run(tmp_path, n_ranks)) as r:
        assert r.ranks == list(range(n_ranks))
        _, rows = r.query("SELECT rank, count(*) FROM metrics WHERE name = 'train/loss' GROUP BY rank ORDER BY rank")
        assert rows == [(rank, _steps(rank)) for rank in range(n_ranks)]
        last = n_ranks - 1
        assert r.query("SELECT value FROM metrics WHERE rank = ? AND name = 'train/loss' AND step = 2",
                       (last,))[1] == [(last * 100.0 + 2,)]
        assert r.series("train/loss", rank=11) == (list(range(_steps(11))), [1100.0 + s for s in range(_steps(11))])
        _, rows = r.query("SELECT rank, step, message FROM findings ORDER BY rank")
        assert rows == [(k, k, f"spike on rank {k}") for k in range(3, n_ranks, 4)]
        _, rows = r.query("SELECT rank, json_extract(data, '$.rank') FROM events WHERE kind = 'lifecycle'")
        assert rows == [(k, k) for k in range(n_ranks)]
        assert r.meta(rank=last)["host"] == f"node-{last}"


def test_nan_round_trips_past_the_attach_limit(run12):
    with open_run(run12) as r:
        steps, values = r.series("train/grad_norm", rank=11)
        assert steps == [0] and math.isnan(values[0])
        assert r.series("train/grad_norm", rank=10) == ([0], [1.0])


def test_copied_tables_answer_like_the_attached_views(run12, tmp_path):
    for rank in range(10):
        shutil.copy(rank_path(run12, rank), rank_path(tmp_path, rank))
    with open_run(tmp_path) as views, open_run(run12) as tables:
        for name in RANKED:
            sql = f"SELECT * FROM {name} WHERE rank < 10"
            (cols, rows), (tcols, trows) = views.query(sql), tables.query(sql)
            assert tcols == cols and cols[0] == "rank", name
            assert sorted(map(repr, trows)) == sorted(map(repr, rows)), name  # repr: 1 and 1.0 differ
        sql = "SELECT count(*) FROM metrics WHERE rank < 10 AND step = '2' AND value > '150'"  # affinity applies
        assert tables.query(sql)[1] == views.query(sql)[1] == [(8,)]


@pytest.mark.parametrize("sql", [
    "DELETE FROM metrics", "INSERT INTO run VALUES (0, 'a', 'b')", "UPDATE run SET value = 1", "DROP TABLE points",
    "CREATE TABLE x (a)", "CREATE INDEX x ON metrics (value)", "ATTACH DATABASE '/tmp/x.db' AS x",
    "DETACH DATABASE main", "PRAGMA query_only = OFF", "PRAGMA journal_mode = DELETE", "SELECT 1; DELETE FROM run",
])
def test_user_sql_cannot_write_past_the_attach_limit(run12, sql):
    with open_run(run12) as r:
        with pytest.raises(QueryRefused):
            r.query(sql)
        assert r.query("SELECT count(*) FROM run WHERE key = 'host'")[1] == [(12,)]


@pytest.mark.parametrize("bad_rank", [0, 11])
def test_corrupt_rank_file_is_named(tmp_path, bad_rank):
    _write_run(tmp_path, 12)
    bad = rank_path(tmp_path, bad_rank)
    bad.write_bytes(b"this is not sqlite at all" * 100)
    with open_run(tmp_path) as r:  # the other ranks are read; the bad one is named, with what is wrong
        assert bad_rank not in r.ranks and len(r.ranks) == 11
        assert r.skipped == [f"{bad}: not a readable stethoscope store (file is not a database)"]
        assert r.query("SELECT count(DISTINCT rank) FROM metrics")[1] == [(11,)]


def test_foreign_sqlite_file_past_the_attach_limit_is_named(tmp_path):
    _write_run(tmp_path, 11)
    foreign = rank_path(tmp_path, 11)
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE other (a)")
    con.commit()
    con.close()
    with open_run(tmp_path) as r:
        assert r.ranks == list(range(11)) and len(r.skipped) == 1
        assert r.skipped[0].startswith(f"{foreign}: an SQLite file, but not a stethoscope")


@pytest.mark.parametrize("n_ranks", [3, 12], ids=["attached", "copied"])
def test_reading_leaves_the_run_directory_unchanged(tmp_path, n_ranks):
    def listing():
        return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in tmp_path.iterdir()}

    _write_run(tmp_path, n_ranks)
    before = listing()
    with open_run(tmp_path) as r:
        r.query("SELECT count(*) FROM metrics")
        assert listing() == before
    assert listing() == before


@pytest.mark.parametrize("n_ranks", [3, 12], ids=["attached", "copied"])
def test_rank_still_being_written_is_read_through_its_wal(tmp_path, n_ranks):
    last = n_ranks - 1
    _write_run(tmp_path, last)
    live = RunStore(rank_path(tmp_path, last))  # open: its newest points are still in the -wal file
    try:
        live.write_points([("train/loss", step, 1100.0 + step, None) for step in range(50)])
        with open_run(tmp_path) as r:
            assert r.ranks == list(range(n_ranks))
            assert r.series("train/loss", rank=last)[1][-1] == 1149.0
            live.write_points([("train/loss", 50, 7.0, None)])
            if n_ranks <= 10:  # attached views are live: a point written after open is seen
                assert r.series("train/loss", rank=last)[1][-1] == 7.0
    finally:
        live.close()


@pytest.mark.parametrize("n_ranks", [3, 12], ids=["attached", "copied"])
def test_superseded_points_carry_their_rank(tmp_path, n_ranks):
    _write_run(tmp_path, n_ranks)
    s = RunStore(rank_path(tmp_path, 2))
    s.write_points([("train/loss", 0, 42.0, None)])  # step 0 again: the old value is kept aside
    s.close()
    with open_run(tmp_path) as r:
        _, rows = r.query("SELECT rank, step, value FROM points_superseded")
    assert rows == [(2, 0, 200.0)]


def test_cli_query_counts_every_rank(run12, cli_env):
    res = run_cli("query", str(run12), "SELECT count(DISTINCT rank) AS n FROM metrics", "--json", env=cli_env)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == [{"n": 12}]


def test_a_rank_with_corrupt_pages_is_dropped_after_an_unreadable_one(tmp_path):
    """Rank 0 is not SQLite (left out when opened), rank 2's pages are damaged (found by a query): the query is
    answered from rank 1 alone, and rank 2 is the one named (the attached databases keep their own names)."""
    for rank in range(3):
        s = RunStore(rank_path(tmp_path, rank))
        s.write_points([("train/loss", step, float(rank), None) for step in range(20_000)])
        s.close()
    rank_path(tmp_path, 0).write_bytes(b"this is not sqlite at all" * 100)
    damaged = rank_path(tmp_path, 2)
    data = bytearray(damaged.read_bytes())
    for at in range(4096 * 3, len(data) - 4096, 4096 * 5):  # every fifth page after the first few
        data[at + 100: at + 400] = b"\xff" * 300
    damaged.write_bytes(bytes(data))
    with open_run(tmp_path) as r:
        assert r.ranks == [1, 2]
        rows = r.query("SELECT rank, count(*), max(value) FROM metrics GROUP BY rank")[1]
        assert rows == [(1, 20_000, 1.0)]
        assert r.ranks == [1] and any(str(damaged) in s and "corrupt" in s for s in r.skipped)
