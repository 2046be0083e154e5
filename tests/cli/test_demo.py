from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli

pytest.importorskip("torch")


@pytest.mark.slow
def test_demo_trains_and_records(tmp_path, cli_env):
    out = tmp_path / "demo"
    res = run_cli("demo", "--steps", "60", "--out", str(out), env=cli_env, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "stethoscope show" in res.stdout and str(out) in res.stdout
    res = run_cli("query", str(out), "SELECT name, COUNT(*) AS n FROM metrics GROUP BY name", "--json", env=cli_env)
    counts = {r["name"]: r["n"] for r in json.loads(res.stdout)}
    assert counts["train/loss"] == 60 and counts["grad/norm"] == 60 and counts["grad/clip_coef"] == 60
    assert counts["eval/loss"] == 1 and counts["perf/tokens_per_s"] == 59
    res = run_cli("query", str(out), "SELECT value FROM metrics WHERE name = 'train/loss' ORDER BY step", "--json",
                  env=cli_env)
    losses = [r["value"] for r in json.loads(res.stdout)]
    assert losses[-1] < losses[0] - 1.0  # it learns
