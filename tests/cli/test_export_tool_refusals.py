"""The export tools' own refusals (MLflow without MLFLOW_ALLOW_FILE_STORE for a directory, W&B online without an API
key): exit 2 and how to go on (user-trial-2: 'could not finish (MlflowException: ...); run again with --debug for the
traceback, and please report it')."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from stethoscope import Monitor
from stethoscope.cli.main import cli
from tests.conftest import run_cli


def _run(tmp_path):
    with Monitor(tmp_path / "run", strict=True, serve=False) as mon:
        for step in range(10):
            mon.step(step, loss=3.0 - step / 10)
    return str(tmp_path / "run")


def test_a_directory_without_the_file_store_switch_is_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    monkeypatch.setenv("DO_NOT_TRACK", "1")
    pytest.importorskip("mlflow")
    result = CliRunner().invoke(cli, ["export", "mlflow", _run(tmp_path), str(tmp_path / "mlruns")])
    assert result.exit_code == 2
    assert "MLFLOW_ALLOW_FILE_STORE=true" in result.output and "sqlite:///mlflow.db" in result.output
    assert "please report" not in result.output and "Traceback" not in result.output


def test_wandb_online_without_an_api_key_is_a_usage_error(tmp_path, cli_env):
    pytest.importorskip("wandb")
    env = {k: v for k, v in cli_env.items() if k not in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_DISABLED")}
    env.update(HOME=str(tmp_path), WANDB_CONFIG_DIR=str(tmp_path / "wandb-config"))  # no ~/.netrc with a key
    # a process of its own: W&B keeps its settings in the process, and the next test's offline run would inherit them
    result = run_cli("export", "wandb", _run(tmp_path), "--mode", "online", env=env)
    assert result.returncode == 2, result.stderr
    assert "wandb refused:" in result.stderr and "--mode offline" in result.stderr
    assert "please report" not in result.stderr and "Traceback" not in result.stderr
