from __future__ import annotations

import csv
import io
import json

import pytest

from stethoscope.store.db import RunStore, rank_path
from tests.conftest import run_cli


@pytest.fixture
def run(tmp_path):
    d = tmp_path / "exp1"
    s = RunStore(rank_path(d, 0))
    s.write_points([("train/loss", i, 3.0 - i * 0.1, s.t0 + i) for i in range(10)]
                   + [("perf/tokens_per_s", i, 1000.0 + i, s.t0 + i) for i in range(10)])
    s.set_meta({"status": "completed", "start_time": s.t0, "end_time": s.t0 + 10})
    s.close()
    return d


def test_query_table_json_csv(run, cli_env):
    res = run_cli("query", str(run), "SELECT step, value FROM metrics WHERE name = 'train/loss' AND step < 3",
                  "--json", env=cli_env)
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    assert rows == [{"step": 0, "value": 3.0}, {"step": 1, "value": 2.9}, {"step": 2, "value": 2.8}]
    res = run_cli("query", str(run), "SELECT rank, step FROM metrics WHERE step < 2 AND name = 'train/loss'",
                  "--csv", env=cli_env)
    assert list(csv.reader(io.StringIO(res.stdout))) == [["rank", "step"], ["0", "0"], ["0", "1"]]
    res = run_cli("query", str(run), "SELECT COUNT(*) AS n FROM metrics", env=cli_env)
    assert res.returncode == 0 and "20" in res.stdout


def test_show_and_runs(run, cli_env):
    res = run_cli("show", str(run), "--json", env=cli_env)
    assert res.returncode == 0, res.stderr
    s = json.loads(res.stdout)
    assert s["steps"] == 10 and s["last_loss"] == pytest.approx(2.1) and s["min_loss"] == pytest.approx(2.1)
    assert s["status"] == "completed" and s["duration_s"] == pytest.approx(10)
    res = run_cli("show", str(run), env=cli_env)
    assert "last loss" in res.stdout and "2.1" in res.stdout
    res = run_cli("runs", str(run.parent), "--json", env=cli_env)
    assert [r["run"] for r in json.loads(res.stdout)] == [str(run)]
    res = run_cli("runs", env=cli_env)  # $STETHOSCOPE_RUNS
    assert res.returncode == 0 and "exp1" in res.stdout


def _assert_clean_error(res, *needles):
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("stethoscope: error:"), res.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.parametrize("command", [("show",), ("query", "SELECT 1")])
def test_bad_runs_give_one_line_and_status_2(tmp_path, cli_env, command):
    missing = tmp_path / "nope"
    _assert_clean_error(run_cli(command[0], str(missing), *command[1:], env=cli_env), str(missing), "no such file")
    empty = tmp_path / "empty"
    empty.mkdir()
    _assert_clean_error(run_cli(command[0], str(empty), *command[1:], env=cli_env), "not a stethoscope run")
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / "rank-00000.sqlite").write_bytes(b"garbage" * 1000)
    _assert_clean_error(run_cli(command[0], str(corrupt), *command[1:], env=cli_env), "not a readable")


def test_runs_on_missing_directory(tmp_path, cli_env):
    _assert_clean_error(run_cli("runs", str(tmp_path / "nope"), env=cli_env), "no such directory")


@pytest.mark.parametrize("sql,needle", [
    ("DELETE FROM points", "only reading"), ("ATTACH DATABASE 'x' AS y", "only reading"),
    ("PRAGMA journal_mode = DELETE", "only reading"), ("SELEC 1", "syntax error"),
    ("SELECT * FROM no_such_table", "no such table"),
])
def test_query_refusals(run, cli_env, sql, needle):
    _assert_clean_error(run_cli("query", str(run), sql, env=cli_env), needle)


def test_demo_bad_arguments(tmp_path, cli_env):
    _assert_clean_error(run_cli("demo", "--steps", "0", "--out", str(tmp_path / "d"), env=cli_env), "--steps")
    _assert_clean_error(run_cli("demo", "--inject", "boom@x", "--out", str(tmp_path / "d"), env=cli_env), "--inject")
