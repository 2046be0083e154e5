"""A query over several runs heads its columns as the same query over one run does (user-trial-4:
`min("value")`, DuckDB's name, where one run's query says `min(value)`)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from stethoscope import Monitor
from stethoscope.cli.main import cli

pytest.importorskip("duckdb")
pytest.importorskip("pyarrow")


def test_several_runs_keep_sqlites_column_names(tmp_path):
    for name in ("a", "b"):
        with Monitor(tmp_path / name, strict=True, serve=False) as mon:
            for s in range(10):
                mon.step(s, loss=3.0 - s / 10)
    sql = "SELECT run, min(value), COUNT(*) AS n FROM metrics WHERE name = 'train/loss' GROUP BY run ORDER BY run"
    many = CliRunner().invoke(cli, ["query", str(tmp_path / "a"), str(tmp_path / "b"), sql, "--csv"])
    assert many.exit_code == 0, many.output
    assert many.stdout.splitlines()[0] == "run,min(value),n"
    duck_only = "SELECT run, arg_max(step, value) AS s FROM metrics GROUP BY ALL ORDER BY ALL"
    res = CliRunner().invoke(cli, ["query", str(tmp_path / "a"), str(tmp_path / "b"), duck_only, "--csv"])
    assert res.exit_code == 0 and res.stdout.splitlines()[0] == "run,s"
