"""The probe's DuckDB engine: the same answers as SQLite over a real store (packed chunks, an unpacked tail,
rewritten steps, NaN), the same refusals, a fallback to SQLite for SQL DuckDB does not parse, a timeout."""

from __future__ import annotations

import math

import pytest

from stethoscope.errors import QueryRefused
from stethoscope.probe.sql import LiveSQL
from stethoscope.store.db import RunStore, rank_path

pytest.importorskip("duckdb")
pytest.importorskip("pyarrow")

QUERIES = [
    "SELECT name, step / 100 AS w, AVG(value), MIN(value), MAX(value), COUNT(*), COUNT(value) FROM metrics "
    "GROUP BY name, w",
    "SELECT step / 250 AS w, SUM(value) FROM metrics WHERE name = 'train/loss' GROUP BY w",
    "SELECT rank, name, COUNT(*) FROM metrics GROUP BY rank, name",
    "SELECT step, name, value, time FROM metrics WHERE step BETWEEN 1020 AND 1030",
    "SELECT * FROM metrics WHERE name = 'lr' AND step % 500 = 0",
    "SELECT series_id, MAX(step), COUNT(time_ms) FROM points GROUP BY series_id",
    "SELECT s.name, COUNT(*) FROM points p JOIN series s ON s.id = p.series_id GROUP BY s.name",
    "SELECT kind, message FROM events WHERE step IN (SELECT step FROM metrics WHERE value IS NULL)",
    "SELECT COUNT(*) FROM metrics WHERE value IS NULL",
]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    run = tmp_path_factory.mktemp("run")
    s = RunStore(rank_path(run, 3), t0=1_700_000_000.0)
    loss = [("train/loss", i, 5.0 / (1 + i) if i % 777 else math.nan, 1_700_000_000.0 + i * 0.5) for i in range(3000)]
    s.write_points(loss)
    s.write_points(("lr", i, 1e-3 * min(1, i / 100), 1_700_000_000.0 + i * 0.5) for i in range(0, 3000, 2))
    s.write_points([("train/loss", i, 9.0, 1_700_002_000.0) for i in range(1500, 1510)])  # a resume rewrote these
    s.write_events([(777, 1_700_000_400.0, "nan", "error", "detector", "non-finite loss", None)])
    s.close()
    return rank_path(run, 3)


def _sql(store, **kw) -> LiveSQL:
    return LiveSQL(store, lambda name: [(3, "MainThread", 1, 0, "train", "train.py", 12, "step()")], rank=3, **kw)


def _rows(result: dict) -> list:
    def key(v):
        return (0, "") if v is None else (1, repr(round(v, 9)) if isinstance(v, float) else repr(v))
    return sorted((tuple(round(v, 9) if isinstance(v, float) else v for v in r) for r in result["rows"]),
                  key=lambda r: [key(v) for v in r])


@pytest.mark.parametrize("sql", QUERIES)
def test_duckdb_answers_what_sqlite_answers(store, sql):
    live = _sql(store)
    fast, slow = live.query(sql, "duckdb"), live.query(sql, "sqlite")
    assert fast["engine"] == "duckdb" and slow["engine"] == "sqlite"
    assert fast["columns"] == slow["columns"]
    assert _rows(fast) == _rows(slow) and fast["rows"]


def test_auto_uses_duckdb_for_the_points_and_sqlite_for_the_rest(store):
    live = _sql(store)
    assert live.query("SELECT COUNT(*) FROM metrics")["engine"] == "duckdb"
    assert live.query("SELECT COUNT(*) FROM events")["engine"] == "sqlite"
    # `window` is reserved in DuckDB: that query goes to SQLite, and is still answered
    r = live.query("SELECT step / 1000 AS window, COUNT(*) FROM metrics GROUP BY window")
    assert r["engine"] == "sqlite" and sorted(r["rows"]) == [[0, 1500], [1, 1500], [2, 1500]]
    assert live.query("SELECT function, line FROM backtrace JOIN metrics ON metrics.step = backtrace.line "
                      "WHERE name = 'lr'", "duckdb")["rows"] == [["train", 12]]


@pytest.mark.parametrize("sql", [
    "DELETE FROM points", "UPDATE metrics SET value = 0", "DROP TABLE points", "CREATE TABLE t AS SELECT * FROM metrics",
    "SELECT 1 FROM metrics; DELETE FROM points", "COPY (SELECT * FROM metrics) TO 'x.csv'",
    "SET enable_external_access = true", "INSTALL httpfs", "ATTACH 'x.db' AS x",
    "SELECT * FROM read_csv('/etc/passwd') JOIN metrics ON true",
])
def test_duckdb_refuses_what_is_not_one_read_of_the_loaded_tables(store, sql, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(QueryRefused, match="refused|failed"):
        _sql(store).query(sql, "duckdb")
    assert not any(tmp_path.iterdir())


def test_a_long_duckdb_query_is_interrupted_at_the_timeout(store):
    with pytest.raises(QueryRefused, match="interrupted after 0.2 s"):
        _sql(store, timeout_s=0.2).query("SELECT SUM(a.value * b.value * c.step) FROM metrics a, metrics b, metrics c",
                                         "duckdb")


def test_rows_are_cut_at_the_limit_and_an_unknown_engine_is_refused(store):
    r = _sql(store, max_rows=7).query("SELECT step FROM metrics", "duckdb")
    assert len(r["rows"]) == 7 and r["truncated"]
    with pytest.raises(QueryRefused, match="unknown engine"):
        _sql(store).query("SELECT 1", "postgres")


def test_the_query_command_answers_a_multi_rank_run_alike_with_either_engine(tmp_path):
    import json

    from click.testing import CliRunner

    from stethoscope.cli.main import cli

    for rank in range(2):
        s = RunStore(rank_path(tmp_path, rank), t0=1_700_000_000.0)
        s.write_points(("train/loss", i, 1.0 / (i + 1 + rank), 1_700_000_000.0 + i) for i in range(2500))
        s.close()

    def ask(sql: str, engine: str) -> tuple[int, list]:
        res = CliRunner().invoke(cli, ["query", str(tmp_path), sql, "--engine", engine, "--json"])
        return res.exit_code, (json.loads(res.output) if res.exit_code == 0 else res.output)

    sql = "SELECT rank, step / 1000 AS w, COUNT(*), MAX(value) FROM metrics GROUP BY rank, w ORDER BY rank, w"
    code, fast = ask(sql, "duckdb")
    assert code == 0 and fast == ask(sql, "sqlite")[1] == ask(sql, "auto")[1]
    assert [r["rank"] for r in fast] == [0, 0, 0, 1, 1, 1] and "MAX(value)" in fast[0]
    code, rows = ask("SELECT COUNT(*) AS n FROM metrics WHERE name ILIKE 'TRAIN/%'", "duckdb")  # DuckDB's own SQL
    assert code == 0 and rows == [{"n": 5000}]
    code, rows = ask("SELECT step / 1000 AS window, COUNT(*) AS n FROM metrics GROUP BY window ORDER BY window", "auto")
    assert code == 0 and [r["n"] for r in rows] == [2000, 2000, 1000]  # DuckDB cannot parse it: SQLite answers
    code, out = ask("DELETE FROM metrics", "duckdb")
    assert code == 2 and "refused" in out
