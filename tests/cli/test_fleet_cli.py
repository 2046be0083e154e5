"""`stethoscope export parquet` and `stethoscope query` over several runs, --ranks, and an export."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from tests.cli.test_cli import _assert_clean_error
from tests.conftest import run_cli
from tests.store.test_export import _make_run

pytest.importorskip("pyarrow")
pytest.importorskip("duckdb")


@pytest.fixture
def runs(tmp_path):
    for name, ranks in (("exp1", 2), ("exp2", 3)):
        for s in _make_run(tmp_path / "runs" / name, ranks=ranks):
            s.close()
    return tmp_path / "runs"


LOSS_BY_RUN = ("SELECT run, count(DISTINCT rank) AS ranks, count(*) AS n FROM metrics WHERE name = 'train/loss' "
               "GROUP BY run ORDER BY run")


def test_export_then_query_the_same_rows_from_stores_and_parquet(runs, tmp_path, cli_env):
    dest = tmp_path / "fleet"
    res = run_cli("export", "parquet", str(runs / "exp1"), str(runs / "exp2"), str(dest), "--json", env=cli_env)
    assert res.returncode == 0, res.stderr
    written = json.loads(res.stdout)
    assert [(r["run"], r["rank"], r["metrics"]) for r in written] == [
        ("exp1", 0, 84), ("exp1", 1, 84), ("exp2", 0, 84), ("exp2", 1, 84), ("exp2", 2, 84)]
    want = [{"run": "exp1", "ranks": 2, "n": 80}, {"run": "exp2", "ranks": 3, "n": 120}]
    res = run_cli("query", str(runs / "exp1"), str(runs / "exp2"), LOSS_BY_RUN, "--json", env=cli_env)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == want
    res = run_cli("query", str(dest), LOSS_BY_RUN, "--json", env=cli_env)
    assert json.loads(res.stdout) == want
    again = run_cli("export", "parquet", str(runs / "exp1"), str(dest), "--json", env=cli_env)
    assert [r["metrics"] for r in json.loads(again.stdout)] == [0, 0]  # nothing new: nothing appended
    res = run_cli("query", str(dest), "SELECT run, rank, type FROM findings ORDER BY run, rank", "--csv", env=cli_env)
    assert res.stdout.splitlines() == ["run,rank,type", "exp1,0,loss_spike", "exp1,1,loss_spike",
                                       "exp2,0,loss_spike", "exp2,1,loss_spike", "exp2,2,loss_spike"]


def test_ranks_all_and_a_subset(runs, cli_env):
    sql = "SELECT run, rank, count(*) AS n FROM metrics GROUP BY ALL ORDER BY rank"
    res = run_cli("query", str(runs / "exp2"), "--ranks", "all", sql, "--json", env=cli_env)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == [{"run": "exp2", "rank": k, "n": 84} for k in range(3)]
    res = run_cli("query", str(runs / "exp2"), "--ranks", "0,2", sql, "--json", env=cli_env)
    assert [r["rank"] for r in json.loads(res.stdout)] == [0, 2]
    res = run_cli("query", str(runs / "exp2"), "--ranks", "all", "--schema", "--json", env=cli_env)
    schema = json.loads(res.stdout)
    assert {"table": "metrics", "column": "run"} == {k: schema[0][k] for k in ("table", "column")}


def test_ranks_no_run_holds_are_named(runs, cli_env):
    """user-trial-2: `--ranks 5` of a 2-rank run answered `count 0` and `--ranks 0,7` dropped rank 7 silently."""
    sql = "SELECT count(*) AS n FROM metrics"
    _assert_clean_error(run_cli("query", str(runs / "exp1"), "--ranks", "5-9,12", sql, env=cli_env),
                        "no rank 5-9, 12 (ranks: 0-1)")
    res = run_cli("query", str(runs / "exp1"), "--ranks", "0,7", sql, "--json", env=cli_env)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == [{"n": 84}]
    assert "no rank 7 (ranks: 0-1); reading the others" in res.stderr
    res = run_cli("query", str(runs / "exp1"), str(runs / "exp2"), "--ranks", "2", sql, "--json", env=cli_env)
    assert res.returncode == 0 and json.loads(res.stdout) == [{"n": 84}]  # exp2 holds rank 2


def test_one_run_keeps_the_sqlite_reader(runs, cli_env):
    res = run_cli("query", str(runs / "exp1"), "SELECT DISTINCT rank FROM metrics ORDER BY rank", "--json", env=cli_env)
    assert json.loads(res.stdout) == [{"rank": 0}, {"rank": 1}]  # no run column: the reader it always was


def test_bad_input_is_one_line(runs, tmp_path, cli_env):
    _assert_clean_error(run_cli("query", str(runs / "exp1"), "--ranks", "x", "SELECT 1", env=cli_env), "--ranks")
    _assert_clean_error(run_cli("query", str(runs / "exp1"), str(runs / "exp2"), "COPY metrics TO 'x.csv'",
                                env=cli_env), "only reading")
    _assert_clean_error(run_cli("query", str(runs / "exp1"), str(tmp_path / "nope"), "SELECT 1", env=cli_env),
                        "nope")
    _assert_clean_error(run_cli("export", "parquet", str(runs / "exp1"), env=cli_env), "RUN... DEST")
    (tmp_path / "afile").write_text("x")
    _assert_clean_error(run_cli("export", "parquet", str(runs / "exp1"), str(tmp_path / "afile"), env=cli_env),
                        "not a directory")


def test_without_pyarrow_and_duckdb_the_core_imports_and_the_verbs_name_the_extra(runs, tmp_path, cli_env):
    code = textwrap.dedent("""
        import sys
        sys.modules["pyarrow"] = None; sys.modules["duckdb"] = None  # as if not installed
        import stethoscope, stethoscope.cli.main
        from stethoscope.cli.main import main
        main(sys.argv[1:])
    """)
    import subprocess

    for args, needle in ((["export", "parquet", str(runs / "exp1"), str(tmp_path / "out")], "stethoscope[fleet]"),
                         (["query", str(runs / "exp1"), "--ranks", "all", "SELECT 1"], "stethoscope[fleet]")):
        res = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=cli_env,
                             timeout=120)
        _assert_clean_error(res, needle)
    res = subprocess.run([sys.executable, "-c", code, "query", str(runs / "exp1"), "SELECT count(*) FROM metrics"],
                         capture_output=True, text=True, env=cli_env, timeout=120)
    assert res.returncode == 0, res.stderr  # one run needs neither
