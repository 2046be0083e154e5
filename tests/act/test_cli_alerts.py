"""`stethoscope alerts RUN` and `stethoscope demo --alerts FILE --inject nan@N` (the fault stays)."""

from __future__ import annotations

import json
import re

import pytest

from stethoscope import Monitor
from stethoscope.act import AlertsConfig, MemoryChannel, Webhook
from tests.conftest import run_cli


def test_alerts_lists_what_was_sent_to_whom_and_what_failed(tmp_path, endpoint, cli_env):
    broken = endpoint("500")
    cfg = AlertsConfig([MemoryChannel(), Webhook(broken.url("/hook?token=SECRET99"))], timeout_s=1.0, retries=0)
    with Monitor(tmp_path / "run", alerts=cfg, strict=True) as mon:
        for step in range(60):
            mon.step(step, loss=float("nan") if step >= 20 else 2.0)
    res = run_cli("alerts", str(tmp_path / "run"), "--json", env=cli_env)
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    assert [(r["channel"], r["kind"], r["status"]) for r in rows if r["channel"] == "memory"] == \
        [("memory", "trigger", "sent"), ("memory", "stop", "sent")]
    failed = [r for r in rows if r["status"] == "failed"]
    assert len(failed) == 2 and all("HTTP 500" in r["error"] and r["to"].endswith("/hook") for r in failed)
    res = run_cli("alerts", str(tmp_path / "run"), "--failed", env=cli_env)
    assert res.returncode == 0 and "2 delivered, 2 failed" in res.stdout and "HTTP 500" in res.stdout
    assert "SECRET99" not in res.stdout + json.dumps(rows)


def test_demo_refuses_a_bad_alerts_file_at_start_in_one_line(tmp_path, cli_env):
    bad = tmp_path / "alerts.toml"
    bad.write_text('[[channel]]\ntype = "webhook"\nmin_severity = "error"\n')
    res = run_cli("demo", "--steps", "20", "--alerts", str(bad), "--out", str(tmp_path / "d"), env=cli_env)
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "channel 1 (webhook): missing url" in res.stderr and str(bad) in res.stderr
    assert not (tmp_path / "d").exists()


@pytest.mark.slow
def test_demo_nan_fault_stays_and_alerts_once_then_once_more_at_the_end(tmp_path, cli_env):
    pytest.importorskip("torch")
    out = tmp_path / "alerts.jsonl"
    conf = tmp_path / "alerts.toml"
    conf.write_text(f'[[channel]]\ntype = "jsonl"\npath = "{out}"\nmin_severity = "error"\n')
    res = run_cli("demo", "--steps", "40", "--inject", "nan@15", "--alerts", str(conf), "--out", str(tmp_path / "d"),
                  env=cli_env, timeout=300)
    assert res.returncode == 0, res.stderr
    sent = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(a["kind"], a["type"], a["step"]) for a in sent] == [("trigger", "nan", 15), ("stop", "nan", 15)]
    assert "25 non-finite records between steps 15 and 39" in sent[1]["message"]  # NaN to the end: it stayed
    assert "stethoscope alerts" in res.stdout
    assert re.search(r"last loss\W+nan\b", res.stdout), res.stdout  # as show prints it, not '-' (user-trial-4)
