from __future__ import annotations

import json
import re

import pytest

from stethoscope.store.query import open_run
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


@pytest.mark.slow
def test_demo_recover_rolls_back_past_a_nan_and_compares_with_the_fault_free_run(tmp_path, cli_env):
    out = tmp_path / "rec"
    res = run_cli("demo", "--steps", "100", "--inject", "nan@40", "--recover", "--out", str(out), env=cli_env,
                  timeout=600)
    assert res.returncode == 0, res.stderr
    text = res.stdout
    assert "the incident, the alerts and the recovery" in text
    story = text[text.index("the incident, the alerts"):]
    assert story.index("ROLLBACK") < story.index("RECOVERED")  # the rollback, then its outcome
    assert "restored the checkpoint of step 30" in story and "skipping the batches of steps 31-60" in story
    assert "[WARNING] rollback at step 40" in story  # announced through the alert channel
    final = [ln for ln in text.splitlines() if "final held-out loss" in ln or "without the fault" in ln]
    assert len(final) == 2 and "1 rollback" in final[0]
    assert "30 batches skipped, LR x0.5" in final[0]
    mine = float(re.search(r"final held-out loss: ([\d.]+)", final[0]).group(1))
    ref = float(final[1].split()[0])
    assert 0 < mine < 10 and 0 < ref < 10
    res = run_cli("query", str(out), "SELECT from_step, to_step, rollback FROM superseded", "--json", env=cli_env)
    (row,) = json.loads(res.stdout)
    assert row["from_step"] == 31 and row["rollback"] == 1
    res = run_cli("query", str(out), "SELECT COUNT(*) AS n FROM metrics WHERE name = 'train/loss' AND value IS NULL",
                  "--json", env=cli_env)
    assert json.loads(res.stdout)[0]["n"] == 0  # the NaN steps were abandoned: the curve is the path that continued


def test_steps_beyond_what_the_demo_can_train_are_refused(tmp_path):
    from click.testing import CliRunner

    from stethoscope.cli.main import cli

    res = CliRunner().invoke(cli, ["demo", "--steps", "99999999999999999999", "--out", str(tmp_path / "d")])
    assert res.exit_code == 2 and "--steps must be between 1 and 1,000,000" in res.output
    assert not (tmp_path / "d").exists()  # refused before anything was trained or written


def test_ctrl_c_is_recorded_as_interrupted_not_failed(tmp_path):
    import torch

    from stethoscope.demo.run import DemoConfig, run

    torch.set_num_threads(1)

    def press_ctrl_c(step, _loss):
        if step == 4:
            raise KeyboardInterrupt

    cfg = DemoConfig(steps=50, n_layer=1, n_embd=32, block_size=16, batch_size=4)
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "run", cfg, press_ctrl_c)
    with open_run(tmp_path / "run") as r:
        (status,), = r.query("SELECT value FROM run WHERE key = 'status'")[1]
        steps = r.query("SELECT COUNT(*) FROM metrics WHERE name = 'train/loss'")[1][0][0]
    assert status.startswith("interrupted") and "failed" not in status and steps == 5


def test_demo_recover_without_a_fault_trains_once(tmp_path, cli_env):
    """With nothing injected the fault-free twin is this very run: it trained it again (as long again) to
    print '+0.0%'. Now one training and a hint to inject a fault."""
    out = tmp_path / "rec"
    res = run_cli("demo", "--steps", "10", "--recover", "--out", str(out), env=cli_env, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "same run, no fault" not in res.stdout and "without the fault" not in res.stdout
    assert "no fault injected" in res.stdout and "--inject diverge@150" in res.stdout


def test_a_one_step_demo_says_step_and_shows_no_rate_it_did_not_measure(tmp_path, cli_env):
    res = run_cli("demo", "--steps", "1", "--out", str(tmp_path / "one"), env=cli_env, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "1 step →" in res.stdout and "1 steps" not in res.stdout  # user-trial-4
    assert "- tok/s" not in res.stdout
