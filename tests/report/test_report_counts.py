"""The report's header counts the findings by severity as `show` does (user-trial-4: "findings: 3" beside a
critical badge, for one critical finding and two info notes)."""

from __future__ import annotations

import json
import re

from click.testing import CliRunner

from stethoscope import Monitor
from stethoscope.cli.main import cli
from stethoscope.records import Finding
from stethoscope.report.html import findings_text


def test_counts_read_as_show_prints_them():
    fs = [Finding("nan", "critical", 5, "x"), Finding("lr_schedule", "info", 1, "y"), Finding("a", "info", 2, "z")]
    assert findings_text(fs) == "2 info, 1 critical"
    assert findings_text([]) == "none"


def test_a_nan_runs_report_header_says_what_show_says(tmp_path):
    with Monitor(tmp_path / "run", strict=True, serve=False) as mon:
        for step in range(60):
            mon.step(step, loss=float("nan") if step >= 40 else 3.0 - step / 60)
    out = tmp_path / "r.html"
    assert CliRunner().invoke(cli, ["report", str(tmp_path / "run"), "-o", str(out)]).exit_code == 0
    header = re.search(r"<span>findings: <b>([^<]*)</b></span>", out.read_text()).group(1)
    shown = json.loads(CliRunner().invoke(cli, ["show", str(tmp_path / "run"), "--json"]).stdout)["findings"]
    assert header == ", ".join(f"{n} {sev}" for sev, n in shown.items() if n)
    assert "critical" in header


def test_a_run_without_an_end_time_lasts_to_its_last_write_as_show_says():
    """A live or killed run has no end_time: `show` counts its duration to the newest point's time; the report
    said '–'. Given the last write time (`last_time`), the report says the same."""
    from stethoscope.report.html import ReportInput, render_report

    page = render_report(ReportInput(title="t", series={"train/loss": ([0, 1], [2.0, 1.9])}, findings=[],
                                     meta={"status": "running", "start_time": 1000.0, "last_time": 1021.0}))
    assert "<span>duration: <b>21 s</b></span>" in page


def test_a_killed_runs_report_gives_the_duration_show_gives(tmp_path):
    import sqlite3
    import time

    with Monitor(tmp_path / "run", strict=True, serve=False) as mon:
        for step in range(30):
            mon.step(step, loss=3.0 - step / 30)
            time.sleep(0.02)
    con = sqlite3.connect(tmp_path / "run" / "rank-00000.sqlite")  # a killed run never wrote its end
    con.execute("DELETE FROM run WHERE key IN ('end_time', 'duration_s')")
    con.commit()
    con.close()
    shown = json.loads(CliRunner().invoke(cli, ["show", str(tmp_path / "run"), "--json"]).stdout)["duration_s"]
    out = tmp_path / "r.html"
    assert CliRunner().invoke(cli, ["report", str(tmp_path / "run"), "-o", str(out)]).exit_code == 0
    got = re.search(r"<span>duration: <b>([^<]*)</b></span>", out.read_text()).group(1)
    assert shown is not None and got == f"{shown:.3g} s"


def test_a_clean_runs_headline_is_its_verdict_not_an_info_note():
    """user-trial-4: a clean demo run's report (and its column in compare) opened with 'periodic_stall at step
    18: one slow step …' where diagnose says 'healthy'."""
    from stethoscope.report.html import headline, lead

    note = Finding("periodic_stall", "info", 18, "one slow step at 18")
    verdict = Finding("healthy", "info", 299, "healthy: loss 4.7 -> 1.98")
    assert lead([note, verdict]) is verdict and "healthy: loss" in headline([note, verdict])
    warn = Finding("loss_spike", "warning", 150, "loss spiked")
    assert lead([note, verdict, warn]) is warn
    assert lead([note]) is note
