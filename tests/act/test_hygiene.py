"""Alert hygiene, measured: a real training run that goes NaN and stays NaN for 300 steps pages each
channel exactly once (critical), plus one final message — live peers send one message per step."""

from __future__ import annotations

import json

import pytest

from stethoscope import Monitor
from stethoscope.act import AlertsConfig, Email, JsonlFile, PagerDuty, Slack, Webhook

torch = pytest.importorskip("torch")

NAN_AT, STEPS = 100, 400  # NaN from step 100 to the end: 300 steps


def _train(run, alerts) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(1)
    with Monitor(run, model=model, optimizer=opt, tokens_per_step=64, alerts=alerts, strict=True) as mon:
        for step in range(STEPS):
            if step == NAN_AT:
                with torch.no_grad():
                    model[0].weight[0, 0] = float("nan")  # as an overflow leaves a weight: NaN from here on
            x = torch.randn(64, 8, generator=gen)
            loss = ((model(x) - torch.sin(x.sum(1, keepdim=True))) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            mon.step(step, loss=loss, grad_norm=norm)


def test_nan_for_300_steps_pages_each_channel_once_plus_one_final_message(tmp_path, endpoint, smtp):
    ep = endpoint()
    jsonl = tmp_path / "alerts.jsonl"
    page = "error"  # an on-call setup: the step-time warnings of a 1 ms step on a busy CI machine page no one
    channels = [Webhook(ep.url("/hook"), page), Slack(ep.url("/services/T0/B0/X"), page),
                PagerDuty("KEY0123", page, url=ep.url("/v2/enqueue")),
                Email(smtp.host, "oncall@example.com", port=smtp.port, min_severity=page), JsonlFile(jsonl, page)]
    _train(tmp_path / "run", AlertsConfig(channels, timeout_s=2.0))

    hook = ep.bodies("/hook")
    assert [(b["kind"], b["severity"], b["type"], b["step"]) for b in hook] == \
        [("trigger", "critical", "nan", NAN_AT), ("stop", "critical", "nan", NAN_AT)]
    slack = ep.bodies("/services/T0/B0/X")
    assert len(slack) == 2 and slack[0]["text"].startswith("[CRITICAL] nan at step 100")
    assert slack[1]["text"].startswith("[RUN STOPPED] nan at step 100")
    pd = ep.bodies("/v2/enqueue")
    assert [(b["event_action"], b["payload"]["severity"]) for b in pd] == [("trigger", "critical")]
    [stopped] = ep.bodies("/v2/change/enqueue")  # on the service's timeline: a trigger on the key would page no one
    assert stopped["payload"]["summary"].startswith("[RUN STOPPED] nan at step 100")
    assert stopped["payload"]["custom_details"]["dedup_key"] == pd[0]["dedup_key"]
    subjects = [msg["Subject"] for _, msg in smtp.messages]
    assert len(subjects) == 2 and subjects[0].startswith("[CRITICAL]") and subjects[1].startswith("[RUN STOPPED]")
    lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert [(x["kind"], x["severity"]) for x in lines] == [("trigger", "critical"), ("stop", "critical")]
    first = hook[0]
    assert first["cause"] and first["fix"] and first["run_dir"].endswith("run") and first["onset_time"]
    assert "still open" in hook[1]["note"] and "completed" in hook[1]["note"]
