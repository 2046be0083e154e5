"""A change of the loss's logging unit at a resume is no divergence (`diagnose.units`).

wild-logs-7 F-B: a pre-training log resumed at step 47700 printed that step's loss for one step (1.4684), then every
record the loss summed over its 10 steps (13.8450, ...), while the eval loss stayed at 4.03-4.07: ERROR divergence
"1.468 -> 13.85, not recovered". Logs composed here in the same shape.
"""

from __future__ import annotations

import json
import random

from click.testing import CliRunner

from stethoscope.cli.main import cli


def _log(eval_rise: float = 0.0, interval: int = 10, factor: int = 10) -> str:
    rng = random.Random(0)
    out = ["[Checkpoint] resumed from ./checkpoints/latest.pt at step 47700", "",
           "step   47700 | loss 1.4684 | lr 1.79e-04 | grad 0.075 | 113.4k tok/s"]
    for k in range(1, 121):
        step = 47700 + interval * k
        loss = factor * 1.40 * (1 + rng.gauss(0, 0.02))
        out.append(f"step   {step} | loss {loss:.4f} | lr 1.79e-04 | grad 0.73 | 37.4k tok/s")
        if step % 100 == 0:
            out.append(f"  [eval] step   {step} | val_loss {4.07 + eval_rise * k / 120 + rng.gauss(0, 0.02):.4f}")
    return "\n".join(out) + "\n"


def _findings(tmp_path, text: str) -> list[dict]:
    log = tmp_path / "train.out"
    log.write_text(text)
    res = CliRunner().invoke(cli, ["diagnose", "--json", str(log)])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    return (data[0] if isinstance(data, list) else data)["findings"]


def test_a_loss_summed_over_the_log_interval_after_a_single_step_record_is_a_unit_change(tmp_path):
    found = _findings(tmp_path, _log())
    loud = [(f["severity"], f["type"]) for f in found if f["severity"] in ("warning", "error", "critical")]
    assert loud == [], loud
    (div,) = [f for f in found if f["type"] == "divergence"]
    assert div["evidence"]["non_problem"] == "logging_unit_change" and div["evidence"]["unit_factor"] == 10


def test_the_same_jump_with_the_eval_loss_going_up_stays_a_divergence(tmp_path):
    found = _findings(tmp_path, _log(eval_rise=3.0))
    assert any(f["type"] == "divergence" and f["severity"] in ("error", "critical") for f in found), found


def test_a_jump_that_is_not_the_log_interval_stays_a_divergence(tmp_path):
    # x10 loss at records 50 steps apart: not a sum over the interval (x50 would be)
    found = _findings(tmp_path, _log(interval=50))
    assert any(f["type"] == "divergence" and f["severity"] in ("error", "critical") for f in found), found
