"""The report's key figures are named and counted as `diagnose` prints them (user-trial): its `steps` was the
Monitor's count of step calls for a stored run (310 for a 300-step demo run that redid 40 steps after a
rollback; diagnose and show: 270 logged, last 299) and the last step number for a log (100 for 10 records)."""

from __future__ import annotations

import json
import re

from click.testing import CliRunner

from stethoscope import Monitor
from stethoscope.cli.main import cli


def _invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def _figures(page: str) -> dict[str, str]:
    return {k: v for k, v in re.findall(r"<span>([a-z ]+): <b>([^<]*)</b></span>", page)}


def test_a_logs_report_counts_steps_as_diagnose_does(tmp_path):
    log = tmp_path / "train.jsonl"
    log.write_text("".join(json.dumps({"step": s, "loss": 3.0 - s / 100}) + "\n" for s in range(10, 110, 10)))
    out = tmp_path / "r.html"
    assert _invoke("report", str(log), "-o", str(out)).exit_code == 0
    d = json.loads(_invoke("diagnose", str(log), "--json").stdout)
    figures = _figures(out.read_text())
    assert figures["last step"] == f"{d['last_step']:,}" == "100"
    assert figures["steps logged"] == f"{d['steps']:,}" == "10"
    assert "steps" not in figures


def test_a_stored_runs_report_and_compare_count_the_logged_steps(tmp_path):
    runs = []
    for name, n in (("a", 30), ("b", 20)):
        with Monitor(tmp_path / name, strict=True) as mon:
            for step in range(0, 2 * n, 2):
                mon.step(step, loss=3.0 / (1 + step / 10))
        runs.append(tmp_path / name)
    out = tmp_path / "a.html"
    assert _invoke("report", str(runs[0]), "-o", str(out)).exit_code == 0
    figures = _figures(out.read_text())
    assert (figures["last step"], figures["steps logged"]) == ("58", "30")
    res = _invoke("compare", str(runs[0]), str(runs[1]), "-o", str(tmp_path / "c.html"))
    assert res.exit_code == 0, res.output
    assert re.search(r"steps logged\s*│\s*30\s*│\s*20", res.stdout)
    assert "<th>steps logged</th>" in (tmp_path / "c.html").read_text()


def test_a_long_evidence_list_is_clipped_as_the_terminal_clips_it():
    """16 batch ids, one a line in a 320-px column, made the NaN finding's row a screen tall."""
    from stethoscope.records import Finding
    from stethoscope.report.html import ReportInput, render_report

    ids = list(range(1000, 1016))
    f = Finding("nan", "critical", 200, "non-finite train/loss at step 200", evidence={"batch_ids": ids})
    page = render_report(ReportInput(title="t", series={"train/loss": ([0, 1], [2.0, 1.9])}, findings=[f], meta={}))
    (shown,) = re.findall(r"<b>batch_ids</b>: ([^<]*)</div>", page)
    assert shown == "[1000, 1001, 1002, 1003, 1004, 1005, 1006, 1007, … 16 in all]"
