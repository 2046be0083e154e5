"""One truth, live: the thresholds a run ran with are the ones its replay uses, and what a live alert says
(type, onset step, severity, message) is the incident `run_incidents` computes — the incidents paged over a
real webhook on 127.0.0.1 are the ones `diagnose --json` lists at warning and above."""

from __future__ import annotations

import json
import math
import sqlite3
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from stethoscope import Monitor
from stethoscope.act import AlertsConfig, RuleConfig, Webhook
from stethoscope.act.truth import RUN_INCIDENTS
from stethoscope.cli.main import cli
from stethoscope.detect.config import META_KEY, DetectConfig
from stethoscope.diagnose.stored import live_findings
from stethoscope.store.query import open_run
from tests.act.conftest import endpoint  # noqa: F401 - the real HTTP server fixture

torch = pytest.importorskip("torch")
SPIKE_AT = 90
DEAF = DetectConfig(loss_spike_min_rel=5.0, loss_spike_warn_rel=5.0)  # a x3 loss is no spike to this run

Incident = tuple[str, "int | None", str]


def _diagnose(path: Path, *args: str) -> set[Incident]:
    res = CliRunner().invoke(cli, ["diagnose", str(path), "--json", *args], catch_exceptions=False)
    assert res.exit_code in (0, 1), res.output
    return {(f["type"], f["step"], f["severity"]) for f in json.loads(res.output)["findings"]}


def _record(path: Path, detect: object) -> None:
    with Monitor(path, strict=True, detect=detect) as mon:
        for s in range(240):
            loss = 2.0 + 3.0 * math.exp(-s / 60) + 0.02 * math.sin(s * 1.7)
            mon.step(s, loss=loss * (3.0 if s == SPIKE_AT else 1.0), grad_norm=0.5 + 0.01 * (s % 7), lr=1e-3)


def _loud(incidents: set[Incident], floor: str = "warning") -> set[Incident]:
    order = ("info", "warning", "error", "critical")
    return {i for i in incidents if order.index(i[2]) >= order.index(floor)}


def test_the_replay_uses_the_thresholds_the_run_ran_with(tmp_path):
    _record(tmp_path / "default", True)
    _record(tmp_path / "deaf", DEAF)
    assert ("loss_spike", SPIKE_AT, "warning") in _diagnose(tmp_path / "default")
    with open_run(tmp_path / "deaf") as run:
        live = {(f.type, f.step, f.severity) for f in live_findings(run)}
        assert json.loads(run.meta()[META_KEY])["loss_spike_min_rel"] == 5.0
    seen = _diagnose(tmp_path / "deaf")
    assert "loss_spike" not in {t for t, _, _ in live | seen}  # with the defaults the replay found one at 90
    assert _loud(seen) == _loud(live)
    # an explicit --set still wins over what the run recorded
    assert ("loss_spike", SPIKE_AT, "warning") in _diagnose(tmp_path / "deaf", "--set", "spike_sigma=6")


def test_a_store_that_recorded_no_thresholds_is_replayed_with_the_defaults(tmp_path):
    _record(tmp_path / "old", DEAF)
    (store,) = (tmp_path / "old").glob("rank-*.sqlite")
    with sqlite3.connect(store) as db:  # as a run written before the thresholds were recorded
        db.execute("DELETE FROM run WHERE key = ?", (META_KEY,))
    assert ("loss_spike", SPIKE_AT, "warning") in _diagnose(tmp_path / "old")
    with sqlite3.connect(store) as db:  # a record this version cannot read: the defaults, not a failure
        db.execute("INSERT INTO run VALUES (?, ?)", (META_KEY, '{"spike_sigma": "loud"}'))
    assert ("loss_spike", SPIKE_AT, "warning") in _diagnose(tmp_path / "old")


def _train(run: Path, alerts: AlertsConfig, lr_jump: float, jump_steps: int) -> None:
    """A tiny MLP on CPU: the LR x`lr_jump` for `jump_steps` steps from 100, a weight turned NaN at 250."""
    from tests.act.recovery_loop import train_lr

    def nan_weight(step, model):
        if step == 250:
            with torch.no_grad():
                model[0].weight[0, 0] = float("nan")

    train_lr(run, 300, lambda step: lr_jump if 100 <= step < 100 + jump_steps else 1.0, before_step=nan_weight,
             serve=True, flush_interval=0.05, strict=True, alerts=alerts)


def _paged(bodies: list[dict]) -> set[Incident]:
    """Each paged incident as its last message says it (one dedup key, one incident)."""
    last = {b["key"]: b for b in bodies}
    return {(b["type"], b["step"], b["severity"]) for b in last.values()}


@pytest.mark.parametrize("lr_jump, jump_steps", [(30.0, 2), (100.0, 10)], ids=["spike_then_nan", "divergence"])
def test_paged_incidents_are_the_incidents_diagnose_lists(tmp_path, endpoint, lr_jump, jump_steps):  # noqa: F811
    """x30 for 2 steps: a loss spike that recovers, then a NaN; x100 for 10: a divergence that owns what the
    stream paged first (an update-ratio jump, a loss spike) and, at the end, the NaN."""
    loud, grave = endpoint(), endpoint()
    cfg = AlertsConfig([Webhook(loud.url()), Webhook(grave.url("/grave"), min_severity="error")],
                       RuleConfig(cooldown_s=0), timeout_s=5.0)
    _train(tmp_path / "run", cfg, lr_jump, jump_steps)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not loud.bodies():
        time.sleep(0.05)
    truth = _diagnose(tmp_path / "run")
    paged = loud.bodies()
    assert paged and all(b["basis"] == RUN_INCIDENTS for b in paged), [b["basis"] for b in paged]
    assert _paged(paged) == _loud(truth), (_paged(paged), truth)
    assert {"nan", "divergence"} & {t for t, _, _ in _paged(paged)}
    assert _paged(grave.bodies()) == _loud(truth, "error")  # the error channel hears of the NaN alone
    for b in paged:  # what the page says is what diagnose says of that incident
        assert b["message"] and b["text"].startswith("[")
