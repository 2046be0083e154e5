"""Each channel against a real server on 127.0.0.1: the payload shape of its API, failures, timeouts."""

from __future__ import annotations

import time

import pytest

from stethoscope.act import Alert, DeliveryError, Email, PagerDuty, Slack, Webhook
from stethoscope.act.dispatch import Dispatcher


def _alert(kind: str = "trigger", **kw) -> Alert:
    base = dict(kind=kind, key="stethoscope/exp1-1234abcd/r0/nan@200", type="nan", severity="critical", step=200,
                rank=0, message="non-finite train/loss at step 200 <!channel>", onset_time=1_800_000_000.0,
                evidence={"count": "1"}, cause="LR too high", fix="roll back and lower the LR",
                run_dir="/runs/exp1", time=1_800_000_100.0)
    return Alert(**{**base, **kw})


def test_webhook_posts_the_alert_as_json(endpoint):
    ep = endpoint()
    Webhook(ep.url(), headers={"Authorization": "Bearer tok-123"}).send(_alert())
    [req] = ep.requests
    assert req["headers"]["Content-Type"] == "application/json" and req["headers"]["Authorization"] == "Bearer tok-123"
    body = req["json"]
    assert body["type"] == "nan" and body["severity"] == "critical" and body["step"] == 200 and body["rank"] == 0
    assert body["kind"] == "trigger" and body["cause"] == "LR too high" and body["fix"].startswith("roll back")
    assert body["run_dir"] == "/runs/exp1" and body["look"] == "stethoscope diagnose /runs/exp1"
    assert body["title"].startswith("[CRITICAL] nan at step 200 on rank 0") and "2027" in body["onset"]


def test_slack_uses_blocks_with_a_text_fallback_and_escapes_markup(endpoint):
    ep = endpoint()
    ch = Slack(ep.url("/services/T000/B000/XXXXSECRET"))
    ch.send(_alert())
    body = ep.bodies()[0]
    assert body["text"].startswith("[CRITICAL] nan at step 200")
    kinds = [b["type"] for b in body["blocks"]]
    assert kinds[0] == "header" and kinds[-1] == "context" and "section" in kinds
    header = body["blocks"][0]["text"]
    assert header["type"] == "plain_text" and len(header["text"]) <= 150
    section = body["blocks"][1]
    assert section["text"]["type"] == "mrkdwn" and "&lt;!channel&gt;" in section["text"]["text"]
    assert all(f["type"] == "mrkdwn" for f in section["fields"]) and len(section["fields"]) <= 10
    assert any("LR too high" in b.get("text", {}).get("text", "") for b in body["blocks"])
    assert "stethoscope diagnose /runs/exp1" in body["blocks"][-1]["elements"][0]["text"]
    assert "SECRET" not in ch.target and "/services" not in ch.target  # the URL is the secret


def test_pagerduty_triggers_and_resolves_one_incident_by_dedup_key(endpoint):
    ep = endpoint()
    ch = PagerDuty("R0UTINGKEY123", url=ep.url("/v2/enqueue"), source="node-7")
    ch.send(_alert())
    ch.send(_alert("resolve", note="resolved at step 260", end_step=260))
    trigger, resolve = ep.bodies()
    assert trigger["routing_key"] == "R0UTINGKEY123" and trigger["event_action"] == "trigger"
    p = trigger["payload"]
    assert p["summary"].startswith("[CRITICAL] nan at step 200") and len(p["summary"]) <= 1024
    assert p["source"] == "node-7" and p["severity"] in ("critical", "error", "warning", "info")
    assert p["timestamp"].endswith("Z") and p["custom_details"]["first fix"].startswith("roll back")
    assert resolve == {"routing_key": "R0UTINGKEY123", "event_action": "resolve", "dedup_key": trigger["dedup_key"]}
    assert trigger["dedup_key"] == "stethoscope/exp1-1234abcd/r0/nan@200"
    assert "R0UTINGKEY123" not in ch.target


def test_email_over_smtp_with_login(smtp):
    ch = Email(smtp.host, ["oncall@example.com"], sender="runs@example.com", port=smtp.port, username="user",
               password="secret-pw")
    ch.send(_alert())
    [(rcpt, msg)] = smtp.messages
    assert rcpt == ["oncall@example.com"] and msg["From"] == "runs@example.com"
    assert msg["Subject"].startswith("[CRITICAL] nan at step 200 on rank 0")
    body = msg.get_payload(decode=True).decode()
    assert "likely cause: LR too high" in body and "look: stethoscope diagnose /runs/exp1" in body


def test_email_to_a_dead_relay_fails_retryably_without_the_password():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens here once the socket is closed
    ch = Email("127.0.0.1", "oncall@example.com", port=port, username="user", password="pw-xyz-123", timeout=1.0)
    with pytest.raises(DeliveryError) as exc:
        ch.send(_alert())
    assert exc.value.retryable and "pw-xyz-123" not in str(exc.value) and "pw-xyz-123" not in ch.target


def test_a_500_is_retried_a_bounded_number_of_times_then_recorded_failed(endpoint):
    ep = endpoint("500")
    d = Dispatcher([Webhook(ep.url(), timeout=2.0)], retries=2, backoff_s=0.01)
    d.submit([(0, _alert())])
    d.close(5.0)
    [out] = d.outcomes()
    assert not out.ok and out.attempts == 3 and "HTTP 500" in out.error and len(ep.requests) == 3


def test_a_4xx_is_not_retried(endpoint):
    ep = endpoint()
    d = Dispatcher([Webhook(ep.url(), timeout=2.0)], retries=2, backoff_s=0.01)
    ep.mode = "500"
    ep.server.RequestHandlerClass.do_POST = _answer_404
    d.submit([(0, _alert())])
    d.close(5.0)
    [out] = d.outcomes()
    assert not out.ok and out.attempts == 1 and out.error.startswith("HTTP 404")


def _answer_404(handler) -> None:
    handler.rfile.read(int(handler.headers.get("Content-Length", 0)))
    handler.send_response(404)
    handler.send_header("Content-Length", "10")
    handler.end_headers()
    handler.wfile.write(b"no_service")


def test_a_hanging_server_times_out_and_close_never_waits_past_its_timeout(endpoint):
    ep = endpoint("hang")
    d = Dispatcher([Webhook(ep.url(), timeout=0.3)], retries=1, backoff_s=0.01)
    d.submit([(0, _alert())])
    outs, t0 = [], time.monotonic()
    while not outs and time.monotonic() - t0 < 10:  # two tries of 0.3 s each, both timed out
        time.sleep(0.05)
        outs = d.outcomes()
    [out] = outs
    assert not out.ok and out.attempts == 2 and "no answer within 0.3 s" in out.error
    d.close(0.1)
    slow = Dispatcher([Webhook(ep.url(), timeout=30.0)], retries=2)
    slow.submit([(0, _alert()), (0, _alert("stop"))])
    time.sleep(0.1)
    t0 = time.monotonic()
    slow.close(0.5)  # the request in flight would wait 30 s: it is cut short at the deadline
    assert time.monotonic() - t0 < 1.5  # 0.5 s, plus slack for a loaded machine; unbounded it would be 30 s
    outs = slow.outcomes()
    assert [o.ok for o in outs] == [False, False] and "not delivered" in outs[1].error


def test_console_prints_a_panel_and_jsonl_appends_a_line(tmp_path):
    import io
    import json

    from stethoscope.act import Console, JsonlFile

    out = io.StringIO()
    Console(file=out).send(_alert())
    assert "[CRITICAL] nan at step 200" in out.getvalue() and "LR too high" in out.getvalue()
    path = tmp_path / "sub" / "alerts.jsonl"
    ch = JsonlFile(path)
    ch.send(_alert())
    ch.send(_alert("stop", note="the run stopped"))
    assert [json.loads(line)["kind"] for line in path.read_text().splitlines()] == ["trigger", "stop"]


def test_the_memory_fake_is_shipped_in_stethoscope_testing():
    from stethoscope.act import MemoryChannel
    from stethoscope.testing import MemoryChannel as Fake

    assert Fake is MemoryChannel
    fake = Fake(fail_with="endpoint down")
    with pytest.raises(DeliveryError, match="endpoint down"):
        fake.send(_alert())
    assert fake.attempts == 1 and fake.sent == []


def test_escalation_is_a_new_slack_message_and_pagerdutys_own_policy_and_a_stop_is_a_change_event(endpoint):
    """PagerDuty folds a trigger on an open dedup_key into the open alert: it pages nobody. So PagerDuty gets
    no escalate (its escalation policy pages the next person) and the run's stop is a change event."""
    from stethoscope.act import AlertsConfig, RuleConfig
    from stethoscope.act.live import LiveAlerts
    from stethoscope.records import Finding
    from stethoscope.testing import FakeClock

    ep, clock = endpoint(), FakeClock()
    queue = [[Finding("throughput_drop", "error", 100, "tokens/s down 30%", source="throughput")]]

    class Detection:
        def observe(self, points):
            return queue.pop() if queue else []

        def finish(self):
            return []

    channels = [PagerDuty("R0UTINGKEY123", url=ep.url("/v2/enqueue")), Slack(ep.url("/services/T0/B0/X"))]
    live = LiveAlerts(Detection(), AlertsConfig(channels, RuleConfig(escalate_after_s=600)), lambda rows: None,
                      lambda rows: None, run_dir="/runs/exp1", clock=clock, strict=True)
    live.observe([("perf/tokens_per_s", 100, 700.0, clock())])
    clock.advance(601)
    live.observe([("perf/tokens_per_s", 101, 700.0, clock())])  # still open: escalated to critical
    live.finish()
    pd = [(r["path"], r["json"]) for r in ep.requests if "enqueue" in r["path"]]
    slack = [r["json"]["text"] for r in ep.requests if r["path"].startswith("/services")]
    assert [s.split("]")[0] for s in slack] == ["[ERROR", "[CRITICAL, ESCALATED", "[RUN STOPPED"]
    assert [(path, body.get("event_action")) for path, body in pd] == [("/v2/enqueue", "trigger"),
                                                                       ("/v2/change/enqueue", None)]
    change = pd[1][1]
    assert change["routing_key"] == "R0UTINGKEY123" and change["payload"]["summary"].startswith("[RUN STOPPED]")
    assert change["payload"]["custom_details"]["dedup_key"] == pd[0][1]["dedup_key"]
