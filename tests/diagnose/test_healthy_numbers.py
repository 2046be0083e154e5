"""The `healthy` verdict quotes the loss as logged (first and last record), and the medians it weighs beside them
as what they are; a curve too short to classify is never called healthy (user-trial-4 items 8, 9: a clean demo run
'healthy: loss 4.698 -> 1.982' where the first loss was 4.997; 5 steps whose loss rose 'healthy'). Real stores."""

from __future__ import annotations

import json
import math

from click.testing import CliRunner

import stethoscope
from stethoscope.cli.main import cli


def _store(path, losses):
    with stethoscope.Monitor(path, serve=False) as mon:
        for step, loss in enumerate(losses):
            mon.step(step, loss=loss, tokens=64)


def _diagnosis(path):
    res = CliRunner().invoke(cli, ["diagnose", str(path), "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_healthy_quotes_the_logged_first_and_last_loss(tmp_path):
    losses = [3.0 * math.exp(-s / 60) + 0.5 + 0.05 * math.sin(7 * s) for s in range(300)]
    _store(tmp_path / "run", losses)
    d = _diagnosis(tmp_path / "run")
    (h,) = [f for f in d["findings"] if f["type"] == "healthy"]
    first, last = f"{losses[0]:.4g}", f"{losses[-1]:.4g}"
    assert h["message"].startswith(f"loss {first} -> {last} (median of the first and last 10 records: "), h["message"]
    assert h["evidence"]["loss_first"] == losses[0] and h["evidence"]["loss_last"] == losses[-1]
    assert not h["message"].startswith("healthy"), "the type is printed before it: no 'healthy at step N: healthy:'"
    assert d["label"].startswith("healthy")


def test_a_five_step_rise_is_too_short_to_judge_not_healthy(tmp_path):
    _store(tmp_path / "run", [4.997, 4.98, 5.3, 5.1, 5.04])
    d = _diagnosis(tmp_path / "run")
    assert d["label"] == "too_short"
    (h,) = [f for f in d["findings"] if f["type"] == "healthy"]
    assert h["severity"] == "info" and h["message"].startswith("too short to judge: loss 4.997 -> 5.04 over 4 steps")
    assert not h["evidence"].get("verdict")
    out = CliRunner().invoke(cli, ["diagnose", str(tmp_path / "run")]).output
    assert "5 steps: too few to judge (only 5 finite loss values" in out and "healthy" not in out
