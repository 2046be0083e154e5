"""Alerts inside a live Monitor: dead endpoints cost the run nothing, failures are recorded, secrets are not."""

from __future__ import annotations

import json
import logging
import time

import pytest

from stethoscope import Monitor
from stethoscope.act import AlertsConfig, MemoryChannel, RuleConfig, Slack, Webhook
from stethoscope.store.query import open_run
from stethoscope.testing import loss_curve


def _train(mon: Monitor, steps: int = 300, nan_from: int = 100) -> None:
    curve = loss_curve(steps, seed=3)
    for step in range(steps):
        bad = step >= nan_from
        mon.step(step, loss=float("nan") if bad else curve[step], grad_norm=float("nan") if bad else 0.5)


# These loops feed made-up losses with no compute between steps: their wall-clock step times (tens of
# microseconds) are the machine's noise, and a loaded machine makes throughput findings of them.
_WALL_CLOCK = frozenset({"throughput_drop", "periodic_stall", "memory_leak", "memory_pressure"})


def _sent(mem: MemoryChannel) -> list:
    """The alerts sent, leaving out those about the test machine's own timing."""
    return [a for a in mem.sent if a.type not in _WALL_CLOCK]


def _alert_rows(run):
    with open_run(run) as r:
        _, rows = r.query("SELECT step, severity, message, data FROM alerts ORDER BY id")
    return [(step, sev, msg, json.loads(data)) for step, sev, msg, data in rows]


def test_hanging_and_failing_endpoints_are_recorded_and_close_waits_at_most_the_timeout(tmp_path, endpoint):
    hang, broken, ok = endpoint("hang"), endpoint("500"), endpoint()
    secret_url = ok.url("/services/T0/B0/SLACKSECRET42")
    cfg = AlertsConfig([Webhook(hang.url()), Webhook(broken.url()), Slack(secret_url)], timeout_s=1.0, retries=1)
    mon = Monitor(tmp_path, alerts=cfg, flush_interval=0.2, strict=True)
    _train(mon)
    time.sleep(0.5)  # the trigger goes out while training would go on
    t0 = time.monotonic()
    mon.close()
    closing = time.monotonic() - t0
    # unbounded, the hanging endpoint would hold close() for 2 messages x (1 s + 0.5 s backoff + 1 s) = 5 s
    assert closing < 1.0 + 1.5, closing  # the delivery timeout, plus the writer's last flush on a loaded machine
    rows = _alert_rows(tmp_path)
    status = {(d["target"], d["alert"]["kind"]): d["status"] for _, _, _, d in rows}
    assert status[(Webhook(hang.url()).target, "trigger")] == "failed"
    assert status[(Webhook(broken.url()).target, "trigger")] == "failed"
    assert status[("http://127.0.0.1:%d/..." % ok.server.server_address[1], "trigger")] == "sent"
    assert status[("http://127.0.0.1:%d/..." % ok.server.server_address[1], "stop")] == "sent"
    failed = [d for _, _, _, d in rows if d["status"] == "failed"]
    assert any("HTTP 500" in d["error"] for d in failed) and any("no answer within 1 s" in d["error"] or
                                                                  "not delivered" in d["error"] for d in failed)
    assert all(sev == "critical" for _, sev, _, _ in rows) and {step for step, _, _, _ in rows} == {100}
    with open_run(tmp_path) as r:
        _, [(failures,)] = r.query("SELECT MAX(value) FROM metrics WHERE name = 'stethoscope/alerts_failed'")
    assert failures >= 2
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert b"SLACKSECRET42" not in stored  # the Slack URL is the secret: never in the run


def test_a_channel_that_raises_anything_never_reaches_training(tmp_path, caplog):
    class Broken:
        name, target = "broken", "nowhere"

        def send(self, alert):
            raise RuntimeError("bug in a user's channel")

    mem = MemoryChannel()
    caplog.set_level(logging.WARNING)
    with Monitor(tmp_path, alerts=AlertsConfig([Broken(), mem], timeout_s=1.0), strict=True) as mon:
        _train(mon, steps=150)
    assert [a.kind for a in _sent(mem)] == ["trigger", "stop"]
    broken = [d for _, _, _, d in _alert_rows(tmp_path) if d["channel"] == "broken"]
    assert [d["status"] for d in broken] == ["failed", "failed"]
    assert all(d["error"] == "RuntimeError: bug in a user's channel" for d in broken)


def test_a_run_that_recovers_gets_one_trigger_and_one_resolve(tmp_path):
    mem = MemoryChannel()
    cfg = AlertsConfig([mem], RuleConfig(cooldown_s=0))
    curve = loss_curve(400, seed=3)
    with Monitor(tmp_path, alerts=cfg, strict=True) as mon:
        for step in range(400):
            mon.step(step, loss=float("nan") if 100 <= step < 110 else curve[step], grad_norm=0.5)
    sent = _sent(mem)
    assert [(a.kind, a.step) for a in sent] == [("trigger", 100), ("resolve", 100)]
    assert sent[1].note == "resolved at step 109"


def test_a_failure_inside_the_alerts_keeps_the_findings_and_is_counted():
    from stethoscope.act.live import ALERTS_ERRORS, LiveAlerts
    from stethoscope.records import Finding

    nan = Finding("nan", "critical", 5, "non-finite train/loss at step 5", source="nonfinite")

    class Detection:
        def observe(self, points):
            return [nan]

        def finish(self):
            return []

    def advise(f):
        raise RuntimeError("advice broke")

    points: list = []
    live = LiveAlerts(Detection(), AlertsConfig([MemoryChannel()]), lambda rows: None, points.extend, advise=advise)
    assert live.observe([("train/loss", 5, float("nan"), 1.0)]) == [nan]  # the findings still reach the store
    assert live.errors == 1 and points == [(ALERTS_ERRORS, 5, 1.0, 1.0)]
    live.finish()
    strict = LiveAlerts(Detection(), AlertsConfig([MemoryChannel()]), lambda rows: None, points.extend,
                        advise=advise, strict=True)
    with pytest.raises(RuntimeError, match="advice broke"):  # strict (tests): re-raised to the writer
        strict.observe([("train/loss", 5, float("nan"), 1.0)])


def test_a_divergence_that_ends_in_nan_is_one_incident_one_alert_thread(tmp_path):
    """Spike, explosion, divergence, then NaN: the symptoms never page apart from their root."""
    mem = MemoryChannel()
    curve = loss_curve(700, seed=3)
    with Monitor(tmp_path, alerts=AlertsConfig([mem], RuleConfig(cooldown_s=0)), strict=True) as mon:
        for step in range(700):
            bad = float("nan") if step >= 450 else None
            mon.step(step, loss=bad or (curve[step] * (3 if step >= 300 else 1)),
                     grad_norm=bad or (5.0 if step >= 300 else 0.5))
    sent = _sent(mem)
    assert {a.key for a in sent} == {sent[0].key} and sent[0].step == 300
    assert [a.kind for a in sent][0] == "trigger" and [a.kind for a in sent][-1] == "stop"
    assert all(a.kind == "escalate" for a in sent[1:-1])
    assert sent[-1].type == "divergence" and sent[-1].severity == "critical"
    assert not any(a.type == "nan" for a in sent)  # the NaN at 450 is a symptom of the divergence


def _wait_for(mem: MemoryChannel, n: int, timeout: float = 10.0) -> list:
    end = time.monotonic() + timeout
    while len(_sent(mem)) < n and time.monotonic() < end:
        time.sleep(0.02)
    return _sent(mem)


def test_nan_bursts_apart_are_incidents_apart_each_paged_and_resolved_while_the_run_goes_on(tmp_path):
    """NaN at 50-59, 100-109 and 150-249: each burst resolves after the catalogue's stretch of finite steps
    (nan: 20) and the next one is a new incident; the second pages, the default cooldown notwithstanding (a
    critical is news), the third comes inside the cooldown of that repeat and is counted, not paged (a NaN
    flapping every few steps would page every burst)."""
    from stethoscope.findings.catalogue import CATALOGUE

    mem = MemoryChannel()
    curve = loss_curve(300, seed=3)
    bad = lambda s: 50 <= s < 60 or 100 <= s < 110 or 150 <= s < 250  # noqa: E731
    with Monitor(tmp_path, alerts=AlertsConfig([mem]), flush_interval=0.1, strict=True) as mon:
        for step in range(300):
            if step == 100:
                mon.flush()
                before = [(a.kind, a.step) for a in _wait_for(mem, 2)]
            mon.step(step, loss=float("nan") if bad(step) else curve[step], grad_norm=0.5)
        mon.flush()
        during = [(a.kind, a.step, a.note) for a in _wait_for(mem, 4)]
    assert CATALOGUE["nan"].resolve_steps == 20
    assert before == [("trigger", 50), ("resolve", 50)]  # told while the run went on, not at close()
    assert during == [("trigger", 50, ""), ("resolve", 50, "resolved at step 59"), ("trigger", 100, ""),
                      ("resolve", 100, "resolved at step 109")]
    assert len({a.key for a in _sent(mem)}) == 2


def test_a_nan_weight_at_a_constant_lr_is_not_blamed_on_the_lr(tmp_path):
    """A real model trained at a constant LR, one weight set to NaN at step 40: the alert's likely cause is a
    non-finite value that entered at once (the LR held, the grad norm kept its level), not "LR too high"."""
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(64, 8), torch.randn(64, 1)
    mem = MemoryChannel()
    with Monitor(tmp_path, model=model, optimizer=opt, alerts=AlertsConfig([mem]), strict=True) as mon:
        for step in range(60):
            if step == 40:
                with torch.no_grad():
                    model[2].weight[0, 3] = float("nan")
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            mon.step(step, loss=loss)
    [page] = [a for a in _sent(mem) if a.kind == "trigger"]
    assert (page.type, page.step) == ("nan", 40)
    assert page.cause.startswith("the LR held at 0.05") and "not an LR overshoot" in page.cause, page.cause
    assert "LR too high" not in page.cause and "locate_nonfinite" in page.fix
    from stethoscope.act.live import knowledge_advice
    from stethoscope.records import Finding

    with open_run(tmp_path) as r:
        _, [(data,)] = r.query("SELECT data FROM findings WHERE type = 'nan' ORDER BY id LIMIT 1")
    advised = knowledge_advice()(Finding.from_dict(json.loads(data)))
    assert not any("LR" in c for c in advised.causes[1:]), advised.causes  # the LR causes are ruled out
