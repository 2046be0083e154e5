"""SQL across runs and ranks in DuckDB: over the rank stores and over their Parquet export, the same rows
as the single-run SQLite reader, with run and rank columns; read-only."""

from __future__ import annotations

import pytest

from stethoscope.errors import QueryRefused, UsageError
from stethoscope.store.export import export_runs
from stethoscope.store.fleet import FleetQuery, parse_ranks, sources
from stethoscope.store.query import open_run
from stethoscope.store.schema import RANKED
from tests.store.test_export import _make_run

pytest.importorskip("pyarrow")
pytest.importorskip("duckdb")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    root = tmp_path_factory.mktemp("fleet")
    runs = {"a": root / "runs" / "a", "b": root / "runs" / "b"}
    for n, path in runs.items():
        for s in _make_run(path, ranks=2 if n == "a" else 3):
            s.close()
    export_runs(list(runs.values()), root / "export")
    return runs, root / "export"


def _sqlite(runs, table: str, ranks=None) -> list[tuple]:
    out = []
    for name, path in runs.items():
        with open_run(path) as r:
            _, rows = r.query(f"SELECT rank, {RANKED[table]} FROM {table}")
        out += [(name, *row) for row in rows if ranks is None or row[0] in ranks]
    return sorted(out, key=repr)


def _fleet(paths, table: str, ranks=None) -> list[tuple]:
    with FleetQuery(sources([str(p) for p in paths]), ranks) as q:
        cols, rows = q.query(f"SELECT * FROM {table}")
    assert cols == ["run", "rank", *(c.strip() for c in RANKED[table].split(","))]
    return sorted(rows, key=repr)


@pytest.mark.parametrize("table", ["metrics", "findings", "alerts", "events", "series", "run"])
def test_stores_and_export_give_the_sqlite_readers_rows(fleet, table):
    runs, export = fleet
    want = _sqlite(runs, table)
    assert want
    assert _fleet(runs.values(), table) == want
    assert _fleet([export], table) == want


def test_a_query_without_timestamps_reads_the_packed_chunks_and_answers_the_same(fleet, monkeypatch):
    """metrics/points come from the packed chunks when the SQL reads no timestamp; a later query on the same
    connection that does read them loads them again, with the timestamps."""
    from stethoscope.store import arrow

    runs, _ = fleet
    packed = []
    real = arrow.packed_table
    monkeypatch.setattr(arrow, "packed_table", lambda *a, **k: packed.append(a[1]) or real(*a, **k))
    cols = "rank, name, step {} 2 AS w, COUNT(*), SUM(value), MIN(value), MAX(value) FROM metrics"
    want = []
    for name, path in runs.items():
        with open_run(path) as r:
            want += [(name, *row) for row in r.query(f"SELECT {cols.format('/')} GROUP BY rank, name, w")[1]]
    with FleetQuery(sources([str(p) for p in runs.values()])) as q:
        _, rows = q.query(f"SELECT run, {cols.format('//')} GROUP BY run, rank, name, w")  # DuckDB's integer division
        assert "metrics" in packed
        got, want = sorted(rows, key=repr), sorted(want, key=repr)
        assert [r[:5] for r in got] == [r[:5] for r in want]
        assert [r[5:] for r in got] == [pytest.approx(r[5:]) for r in want]  # sums in another order
        _, timed = q.query("SELECT run, rank, step, name, value, time FROM metrics")
    assert sorted(timed, key=repr) == _sqlite(runs, "metrics") and any(r[-1] is not None for r in timed)


@pytest.mark.parametrize("table", ["points", "points_superseded", "batches", "checkpoints", "trace", "stacks"])
def test_store_only_tables(fleet, table):
    runs, export = fleet
    assert _fleet(runs.values(), table) == _sqlite(runs, table)
    with pytest.raises(QueryRefused, match=f"table {table} is not in a Parquet export"):
        _fleet([export], table)


def test_ranks_subset_and_the_slowest_rank_per_step(fleet):
    runs, export = fleet
    assert _fleet([runs["b"]], "metrics", {0, 2}) == _sqlite({"b": runs["b"]}, "metrics", {0, 2})
    assert _fleet([export], "metrics", {1}) == _sqlite(runs, "metrics", {1})
    sql = ("SELECT run, step, arg_max(rank, value) AS slowest FROM metrics WHERE name = 'perf/step_time_s' "
           "GROUP BY ALL ORDER BY run, step")
    with FleetQuery(sources([str(export)])) as q:
        _, rows = q.query(sql)
    assert {(run, slowest) for run, _, slowest in rows} == {("a", 1), ("b", 2)}  # _make_run: higher rank, slower


@pytest.mark.parametrize("sql,needle", [
    ("COPY (SELECT 1) TO 'out.csv'", "only reading"), ("ATTACH 'x.db' AS y", "only reading"),
    ("SET threads = 1", "only reading"), ("CREATE TABLE t AS SELECT 1", "only reading"),
    ("SELECT 1; SELECT 2", "one statement"), ("SELECT * FROM read_csv('/etc/passwd')", "only the run stores"),
    ("SELEC 1", "syntax error"), ("SELECT * FROM nope", "tables: metrics"),
])
def test_only_reading(fleet, sql, needle):
    runs, export = fleet
    with FleetQuery(sources([str(runs["a"]), str(export)])) as q:
        with pytest.raises(QueryRefused, match=needle):
            q.query(sql)
        assert q.query("SELECT count(*) FROM metrics")[1][0][0] > 0  # still usable after a refusal


def test_parse_ranks():
    assert parse_ranks("all") is None and parse_ranks(None) is None
    assert parse_ranks("0,3,8-10") == {0, 3, 8, 9, 10}
    with pytest.raises(UsageError, match="--ranks"):
        parse_ranks("x")


def test_an_unreadable_rank_is_skipped_and_named(tmp_path):
    for s in _make_run(tmp_path / "r", ranks=2):
        s.close()
    (tmp_path / "r" / "rank-00002.sqlite").write_bytes(b"garbage" * 500)
    with FleetQuery(sources([str(tmp_path / "r")])) as q:
        assert q.query("SELECT DISTINCT rank FROM metrics ORDER BY rank")[1] == [(0,), (1,)]
        assert len(q.skipped) == 1 and "rank-00002.sqlite" in q.skipped[0]


def test_an_export_without_findings_and_words_that_name_tables(tmp_path):
    from stethoscope.store.db import RunStore, rank_path

    s = RunStore(rank_path(tmp_path / "quiet", 0))
    s.write_points([("train/loss", i, 1.0, s.t0 + i) for i in range(5)])
    s.close()
    export_runs([tmp_path / "quiet"], tmp_path / "export")
    with FleetQuery(sources([str(tmp_path / "export")])) as q:
        assert q.query("SELECT count(*) FROM findings")[1] == [(0,)]
        assert q.query("SELECT count(*) FROM alerts")[1] == [(0,)]
        assert q.query("SELECT count(*) FROM metrics WHERE name <> 'stacks of trace'")[1] == [(5,)]
