"""export mlflow to a directory without MLFLOW_ALLOW_FILE_STORE: exit 2 and how to go on (user-trial-2: 'could not
finish (MlflowException: ...); run again with --debug for the traceback, and please report it')."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from stethoscope import Monitor
from stethoscope.cli.main import cli

pytest.importorskip("mlflow")


def test_a_directory_without_the_file_store_switch_is_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    monkeypatch.setenv("DO_NOT_TRACK", "1")
    with Monitor(tmp_path / "run", strict=True, serve=False) as mon:
        for step in range(10):
            mon.step(step, loss=3.0 - step / 10)
    result = CliRunner().invoke(cli, ["export", "mlflow", str(tmp_path / "run"), str(tmp_path / "mlruns")])
    assert result.exit_code == 2
    assert "MLFLOW_ALLOW_FILE_STORE=true" in result.output and "sqlite:///mlflow.db" in result.output
    assert "please report" not in result.output and "Traceback" not in result.output
