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
