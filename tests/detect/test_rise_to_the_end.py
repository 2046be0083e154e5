"""A short run that ends inside a sustained rise (`detect.comeback.up_to_the_end`): the loss level stayed well
above its best for the last quarter of the log, before `divergence_min_steps` had passed. It did not come back:
a divergence dated where the rise began, not a spike that "recovered" on one lucky record."""

from __future__ import annotations

import json
import random
from pathlib import Path

from stethoscope.detect.registry import DetectorSet
from stethoscope.diagnose.engine import diagnose_run
from stethoscope.importers import read_any
from stethoscope.records import LOSS, StepRecord

ROOT = Path(__file__).resolve().parents[1] / "assets" / "real_trainers"
CASES = {c["case"]: c for c in json.loads((ROOT / "labels.json").read_text())}


def test_an_lr_jump_that_left_the_loss_higher_to_the_end_of_a_short_run_is_a_divergence() -> None:
    # Ignite, LR x100 at step 132: a spike to 3.2, one record back near the old level, then the loss settles
    # ~45% higher (0.9 -> 1.3) for the last 100 of 256 steps
    c = CASES["ignite_engine-lr_jump-s2-console"]
    (d,) = [diagnose_run(run) for run in read_any(ROOT / c["file"])]
    div = [f for f in d.findings if f.type == "divergence"]
    assert len(div) == 1 and div[0].severity == "error" and div[0].evidence["recovered"] == "not"
    assert abs(div[0].step - 132) <= 40  # +-10 logged steps of 4


def _findings(losses: list[float]) -> list:
    ds = DetectorSet()
    out = []
    for i, v in enumerate(losses, 1):
        out += ds.update(StepRecord(step=4 * i, values={LOSS: v}))
    return out + ds.finish()


def test_a_rise_shorter_than_a_quarter_of_the_log_at_its_end_is_not_called_a_divergence() -> None:
    rng = random.Random(0)
    base = [1.0 - 0.001 * i + rng.gauss(0, 0.02) for i in range(200)]  # ends near 0.8
    ramp = [0.8 + 0.02 * i + rng.gauss(0, 0.02) for i in range(20)]  # a slow climb, no jump: 0.8 -> 1.2
    short = [1.2 + rng.gauss(0, 0.02) for _ in range(15)]  # up for the last 6% of the log: too little to judge
    assert not [f for f in _findings(base + ramp + short) if f.type == "divergence" and f.severity != "info"]
    # a short run: 60 records, the loss up for its last 22 (88 steps, under divergence_min_steps = 100)
    head = [1.0 - 0.005 * i + rng.gauss(0, 0.02) for i in range(40)]  # ends near 0.8
    up = [1.2 + rng.gauss(0, 0.02) for _ in range(22)]
    assert not [f for f in _findings(head + up[:5]) if f.type == "divergence" and f.severity != "info"]
    div = {f.step: f for f in _findings(head + up) if f.type == "divergence"}
    assert len(div) == 1
    (f,) = div.values()
    assert f.evidence["recovered"] == "not" and 4 * 40 <= f.step <= 4 * 44
