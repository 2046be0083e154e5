"""`--set key=value` and `--config FILE.toml` reach the detectors of diagnose, report and compare."""

from __future__ import annotations

import json
import math

import pytest

from tests.conftest import run_cli

DEAF_TO_SPIKES = ("spike_sigma=1e9", "loss_spike_min_rel=100", "loss_spike_warn_rel=100")


def _spiky_log(path):
    """An HF trainer_state.json of a healthy run whose loss doubles for one logged step (150)."""
    losses = [(s, 2.0 + 3.0 * math.exp(-s / 60) + 0.02 * math.sin(s * 1.7)) for s in range(1, 301)]
    losses[149] = (150, 2 * losses[149][1])
    rows = [{"epoch": i / 100, "learning_rate": 1e-4, "loss": v, "step": s} for i, (s, v) in enumerate(losses)]
    path.write_text(json.dumps({"global_step": 300, "log_history": rows}))
    return path


def _spikes(res):
    assert res.returncode == 0, res.stderr
    return [f["step"] for f in json.loads(res.stdout)["findings"] if f["type"] == "loss_spike"]


def test_set_changes_the_findings(tmp_path, cli_env):
    log = _spiky_log(tmp_path / "trainer_state.json")
    assert _spikes(run_cli("diagnose", str(log), "--json", env=cli_env)) == [150]
    sets = [a for kv in DEAF_TO_SPIKES for a in ("--set", kv)]
    assert _spikes(run_cli("diagnose", str(log), "--json", *sets, env=cli_env)) == []


def test_config_file_and_set_wins_over_it(tmp_path, cli_env):
    log = _spiky_log(tmp_path / "trainer_state.json")
    toml = tmp_path / "detect.toml"
    toml.write_text("[other]\nx = 1\n\n[detect]\nspike_sigma = 1e9\nloss_spike_min_rel = 100\n"
                    "loss_spike_warn_rel = 100\n")
    assert _spikes(run_cli("diagnose", str(log), "--json", "--config", str(toml), env=cli_env)) == []
    back = ("--set", "spike_sigma=6", "--set", "loss_spike_min_rel=0.1", "--set", "loss_spike_warn_rel=0.25")
    assert _spikes(run_cli("diagnose", str(log), "--json", "--config", str(toml), *back, env=cli_env)) == [150]


def test_report_takes_the_thresholds_too(tmp_path, cli_env):
    log = _spiky_log(tmp_path / "trainer_state.json")
    default, deaf = tmp_path / "default.html", tmp_path / "deaf.html"
    assert run_cli("report", str(log), "-o", str(default), env=cli_env).returncode == 0
    sets = [a for kv in DEAF_TO_SPIKES for a in ("--set", kv)]
    res = run_cli("report", str(log), "-o", str(deaf), *sets, env=cli_env)
    assert res.returncode == 0, res.stderr
    assert "loss_spike" in default.read_text() and "loss_spike" not in deaf.read_text()


@pytest.mark.parametrize("args, expected", [
    (("--set", "spike_sigmaa=8"), ["--set: unknown detector setting 'spike_sigmaa'", "did you mean 'spike_sigma'",
                                  "valid keys: spike_sigma, spike_window"]),
    (("--set", "spike_window=2.5"), ["DetectConfig.spike_window expects an integer, got 2.5"]),
    (("--set", "spike_sigma=abc"), ["DetectConfig.spike_sigma expects a number, got 'abc'"]),
    (("--set", "spike_sigma=-1"), ["DetectConfig.spike_sigma must be >= 0"]),
    (("--set", "spike_sigma"), ["expected key=value, got 'spike_sigma'"]),
])
def test_bad_set_exits_2_with_one_line_naming_the_key(tmp_path, cli_env, args, expected):
    log = _spiky_log(tmp_path / "trainer_state.json")
    res = run_cli("diagnose", str(log), *args, env=cli_env)
    assert res.returncode == 2 and res.stdout == ""
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    for text in expected:
        assert text in res.stderr


@pytest.mark.parametrize("content, expected", [
    ("[detect]\nspike_sigmaa = 8\n", "unknown detector setting 'spike_sigmaa'"),
    ("[detect]\nspike_window = true\n", "DetectConfig.spike_window expects an integer, got True"),
    ("spike_sigma = 8\n", "no [detect] table"),
    ("[detect\n", "not valid TOML"),
])
def test_bad_config_file_exits_2_naming_the_file(tmp_path, cli_env, content, expected):
    log = _spiky_log(tmp_path / "trainer_state.json")
    toml = tmp_path / "bad.toml"
    toml.write_text(content)
    res = run_cli("diagnose", str(log), "--config", str(toml), env=cli_env)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert str(toml) in res.stderr and expected in res.stderr


def test_missing_config_file_exits_2(tmp_path, cli_env):
    log = _spiky_log(tmp_path / "trainer_state.json")
    res = run_cli("diagnose", str(log), "--config", str(tmp_path / "missing.toml"), env=cli_env)
    assert res.returncode == 2 and "missing.toml: no such file" in res.stderr
