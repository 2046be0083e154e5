"""Parquet export: every value read back with pyarrow and with DuckDB equals the SQLite stores; a second
export of a live run appends only what is new."""

from __future__ import annotations

import hashlib
import json
import math

import pytest

from stethoscope.errors import UsageError
from stethoscope.records import Finding
from stethoscope.store.db import RunStore, rank_path
from stethoscope.store.export import STATE_FILE, export_runs
from stethoscope.store.query import open_run

pa = pytest.importorskip("pyarrow")
ds = pytest.importorskip("pyarrow.dataset")
pq = pytest.importorskip("pyarrow.parquet")
duckdb = pytest.importorskip("duckdb")

T0 = 1_763_900_000.123456
COLUMNS = {  # the SQLite view's columns for each exported table, in export order
    "metrics": "step, name, value, time",
    "events": "id, step, time, kind, severity, source, message, data",
    "findings": "id, step, time, type, severity, source, message, data",
    "series": "id, name, unit",
    "run": "key, value",
}


def _write(store: RunStore, rank: int, steps: range) -> None:
    loss = [(s, math.nan if s == 7 else 4.0 / (1 + s) + rank * 1e-3 + 1e-9 * s) for s in steps]
    store.write_points([("train/loss", s, v, store.t0 + s * 0.0371) for s, v in loss]
                       + [("perf/step_time_s", s, 0.1 + 0.01 * rank + (s % 5) * 1e-4, None if s % 11 == 0 else
                           store.t0 + s * 0.0371 + 0.001) for s in steps]
                       + [("eval/loss", s, 3.0 - s * 0.01, store.t0 + s) for s in steps if s % 10 == 9])
    first = steps[0]
    store.write_findings([Finding("loss_spike", "warning", first + 3, f"spike on rank {rank} 'quoted'",
                                  evidence={"z": 9.5})], time_s=store.t0 + first)
    store.write_events([(first + 4, store.t0 + first + 4, "alert", "error", "rules", "paged", {"to": "slack"}),
                        (first + 5, None, "lifecycle", "info", "", "flush", None)])


def _make_run(path, ranks: int = 3, steps: range = range(40)) -> list[RunStore]:
    stores = []
    for rank in range(ranks):
        s = RunStore(rank_path(path, rank), t0=T0 + rank)
        _write(s, rank, steps)
        s.set_meta({"status": "running", "host": f"node-{rank}", "config": {"lr": 3e-4}})
        stores.append(s)
    return stores


def _sqlite_rows(runs: dict[str, object], table: str) -> list[tuple]:
    out = []
    for name, path in runs.items():
        with open_run(path) as r:
            _, rows = r.query(f"SELECT rank, {COLUMNS[table]} FROM {table}")
        out += [(name, *row) for row in rows]
    return sorted(out, key=repr)


def _pyarrow_rows(dest, table: str) -> list[tuple]:
    part = ds.partitioning(pa.schema([("run", pa.string()), ("rank", pa.int32())]), flavor="hive")
    tbl = ds.dataset(dest / table, format="parquet", partitioning=part).to_table()
    cols = ["run", "rank", *(c.strip() for c in COLUMNS[table].split(","))]
    return sorted(zip(*(tbl.column(c).to_pylist() for c in cols)), key=repr)


def _duckdb_rows(dest, table: str) -> list[tuple]:
    sql = (f"SELECT run, rank, {COLUMNS[table]} FROM read_parquet('{dest / table}/**/*.parquet', "
           "hive_partitioning = true, hive_types = {'run': VARCHAR, 'rank': INTEGER})")
    return sorted(duckdb.connect().execute(sql).fetchall(), key=repr)


def _assert_equal_everywhere(dest, runs: dict[str, object]) -> None:
    for table in COLUMNS:
        want = _sqlite_rows(runs, table)
        assert want, table
        assert _pyarrow_rows(dest, table) == want, table
        assert _duckdb_rows(dest, table) == want, table


def _closed(stores: list[RunStore]) -> None:
    for s in stores:
        s.close()


def test_every_value_reads_back_equal_with_pyarrow_and_duckdb(tmp_path):
    runs = {"exp-a": tmp_path / "runs" / "exp-a", "exp b=1%": tmp_path / "runs" / "exp b=1%"}
    for path in runs.values():
        _closed(_make_run(path))
    dest = tmp_path / "fleet"
    result = export_runs(list(runs.values()), dest)
    assert [(r.run, r.rank) for r in result.ranks] == [(n, k) for n in runs for k in range(3)]
    assert all(r.rows == {"metrics": 40 + 40 + 4, "events": 3, "findings": 1} for r in result.ranks)
    _assert_equal_everywhere(dest, runs)
    # NaN stays NULL, a missing time stays NULL (the comparison above holds every bit of the times)
    rows = {(r[3], r[2]): r for r in _pyarrow_rows(dest, "metrics") if r[0] == "exp-a" and r[1] == 0}
    assert rows["train/loss", 7][4] is None and rows["train/loss", 7][5] == pytest.approx(T0 + 7 * 0.0371, abs=1e-3)
    assert rows["perf/step_time_s", 11][5] is None and rows["perf/step_time_s", 12][5] is not None
    assert (dest / "metrics" / "run=exp%20b%3D1%25" / "rank=2" / "part-000000.parquet").is_file()


def test_one_row_group_per_metric_chunk_zstd(tmp_path):
    _closed(_make_run(tmp_path / "run", ranks=1))
    export_runs([tmp_path / "run"], tmp_path / "fleet")
    meta = pq.ParquetFile(tmp_path / "fleet" / "metrics" / "run=run" / "rank=0" / "part-000000.parquet").metadata
    groups = [meta.row_group(i) for i in range(meta.num_row_groups)]
    name_col = meta.schema.names.index("name")
    stats = [(g.column(name_col).statistics.min, g.column(name_col).statistics.max, g.num_rows) for g in groups]
    assert stats == [("eval/loss", "eval/loss", 4), ("perf/step_time_s", "perf/step_time_s", 40),
                     ("train/loss", "train/loss", 40)]
    assert {g.column(i).compression for g in groups for i in range(g.num_columns)} == {"ZSTD"}


def _digests(dest) -> dict[str, str]:
    return {str(p.relative_to(dest)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in dest.rglob("part-*.parquet")}


def test_a_live_run_is_appended_without_rewriting_or_duplicating(tmp_path):
    run, dest = tmp_path / "live", tmp_path / "fleet"
    stores = _make_run(run, ranks=2, steps=range(0, 25))  # open writers: the run is live (WAL)
    first = export_runs([run], dest)
    assert sum(r.rows["metrics"] for r in first.ranks) == 2 * (25 + 25 + 2)
    before = _digests(dest)
    for rank, s in enumerate(stores):
        _write(s, rank, range(25, 60))
    second = export_runs([run], dest)
    assert [r.rows for r in second.ranks] == [{"metrics": 35 + 35 + 4, "events": 3, "findings": 1}] * 2
    after = _digests(dest)
    assert {k: v for k, v in after.items() if k in before} == before  # nothing already written was touched
    assert sorted(set(after) - set(before)) == sorted(
        f"{t}/run=live/rank={k}/part-000001.parquet" for t in ("metrics", "events", "findings") for k in (0, 1))
    _assert_equal_everywhere(dest, {"live": run})
    third = export_runs([run], dest)  # nothing new: no new part file
    assert [r.rows for r in third.ranks] == [{"metrics": 0, "events": 0, "findings": 0}] * 2
    assert _digests(dest) == after
    state = json.loads((dest / STATE_FILE).read_text())
    assert state["runs"]["live"]["ranks"]["1"]["metrics"]["train/loss"] == 59
    _closed(stores)


def test_steps_recorded_again_after_a_resume_rewrite_that_rank_only(tmp_path):
    run, dest = tmp_path / "resumed", tmp_path / "fleet"
    stores = _make_run(run, ranks=2, steps=range(30))
    export_runs([run], dest)
    untouched = {k: v for k, v in _digests(dest).items() if "rank=1" in k}
    stores[0].write_points([("train/loss", s, 1.0 + s, T0 + 100 + s) for s in range(20, 35)])  # resumed at 20
    result = export_runs([run], dest)
    assert [r.rewritten for r in result.ranks] == [True, False]
    assert {k: v for k, v in _digests(dest).items() if "rank=1" in k} == untouched
    _assert_equal_everywhere(dest, {"resumed": run})
    _closed(stores)


def test_a_crashed_export_is_repeated_under_the_same_part_names(tmp_path):
    run, dest = tmp_path / "r", tmp_path / "fleet"
    _closed(_make_run(run, ranks=1))
    export_runs([run], dest)
    state = (dest / STATE_FILE).read_text()
    (dest / STATE_FILE).write_text(json.dumps({"format": 1, "runs": {"r": {"source": str(run.resolve()),
                                                                           "ranks": {}}}}))
    export_runs([run], dest)  # as if the state update after the files had been lost
    assert sorted(p.name for p in dest.rglob("part-*.parquet")) == ["part-000000.parquet"] * 3
    _assert_equal_everywhere(dest, {"r": run})
    assert json.loads((dest / STATE_FILE).read_text()) == json.loads(state)


def test_names_and_destinations_are_checked(tmp_path):
    a, b = tmp_path / "x" / "exp", tmp_path / "y" / "exp"
    _closed(_make_run(a, ranks=1))
    _closed(_make_run(b, ranks=1))
    with pytest.raises(UsageError, match="two runs are named 'exp'"):
        export_runs([a, b], tmp_path / "fleet")
    export_runs([a], tmp_path / "fleet")
    with pytest.raises(UsageError, match="already holds a run named 'exp'"):
        export_runs([b], tmp_path / "fleet")
    export_runs([b], tmp_path / "fleet", names=["exp-y"])
    assert sorted(p.name for p in (tmp_path / "fleet" / "metrics").iterdir()) == ["run=exp", "run=exp-y"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="not a directory"):
        export_runs([a], tmp_path / "file")


@pytest.mark.slow  # spawns worker processes
def test_ranks_exported_in_parallel_processes_write_the_same(tmp_path):
    run = tmp_path / "par"
    _closed(_make_run(run, ranks=3))
    one = export_runs([run], tmp_path / "one")
    two = export_runs([run], tmp_path / "two", jobs=2)
    assert [(r.rank, r.rows, r.files) for r in one.ranks] == [(r.rank, r.rows, r.files) for r in two.ranks]
    for table in COLUMNS:
        assert _pyarrow_rows(tmp_path / "two", table) == _pyarrow_rows(tmp_path / "one", table)
    assert (json.loads((tmp_path / "two" / STATE_FILE).read_text())["runs"]["par"]["ranks"]
            == json.loads((tmp_path / "one" / STATE_FILE).read_text())["runs"]["par"]["ranks"])


def test_an_unreadable_rank_is_skipped_and_named(tmp_path):
    run = tmp_path / "r"
    _closed(_make_run(run, ranks=2))
    (run / "rank-00002.sqlite").write_bytes(b"garbage" * 500)
    result = export_runs([run], tmp_path / "fleet")
    assert [r.rank for r in result.ranks] == [0, 1]
    assert len(result.skipped) == 1 and "rank-00002.sqlite" in result.skipped[0]


def test_exports_while_a_real_monitor_trains_add_up_to_the_finished_run(tmp_path):
    from tests.cli.test_watch import _live_run

    run, trainer, stop, _ = _live_run(tmp_path)  # a Monitor writing in a thread (a NaN finding at step 40)
    dest = tmp_path / "fleet"
    try:
        first = export_runs([run], dest)
        second = export_runs([run], dest)
    finally:
        stop.set()
        trainer.join(60)
    last = export_runs([run], dest)  # after close: the rest of the run
    assert first.ranks[0].rows["metrics"] > 0 and first.ranks[0].rows["findings"] >= 1
    assert sum(r.ranks[0].rows["metrics"] for r in (first, second, last)) == len(_sqlite_rows({"live": run}, "metrics"))
    _assert_equal_everywhere(dest, {"live": run})
