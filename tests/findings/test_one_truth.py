"""One truth: every view of a run (show, runs, diagnose, compare, report, watch, the dashboard) shows the
incidents `diagnose.stored.run_incidents` computes — on a live run, a finished one, one that rolled back,
an imported log and a foreign log read in place."""

from __future__ import annotations

import html
import json
import math
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from stethoscope import Monitor
from stethoscope.cli.diagnosis import write_compare
from stethoscope.cli.main import cli
from stethoscope.cli.watch_view import Incidents
from stethoscope.diagnose.stored import incidents_at
from stethoscope.serve.dashboard import App
from stethoscope.store import tail

torch = pytest.importorskip("torch")
NAN_AT, SPIKE_AT = 150, 90

Incident = tuple[str, int | None, str]


def _curve(steps: int = 240) -> list[float]:
    losses = [2.0 + 3.0 * math.exp(-s / 60) + 0.02 * math.sin(s * 1.7) for s in range(steps)]
    losses[SPIKE_AT] *= 3.0
    return losses


def _record(mon: Monitor, losses: list[float], nan_at: int | None = NAN_AT) -> None:
    for s, v in enumerate(losses):
        mon.step(s, loss=float("nan") if s == nan_at else v, grad_norm=0.5 + 0.01 * (s % 7), lr=1e-3)


def _hf_log(path: Path) -> Path:
    rows = [{"step": s + 1, "loss": float("nan") if s == NAN_AT else v, "learning_rate": 1e-3, "epoch": s / 100}
            for s, v in enumerate(_curve())]
    path.write_text(json.dumps({"global_step": len(rows), "log_history": rows}, allow_nan=True))
    return path


def _cli(*args: str) -> str:
    res = CliRunner().invoke(cli, list(args), catch_exceptions=False, env={"COLUMNS": "240", "NO_COLOR": "1"})
    assert res.exit_code in (0, 1), res.output
    return res.output


def _of(findings: list[dict]) -> set[Incident]:
    return {(f["type"], f["step"], f["severity"]) for f in findings}


def _counts(incidents: set[Incident]) -> dict[str, int]:
    out: dict[str, int] = {}
    for _, _, sev in incidents:
        out[sev] = out.get(sev, 0) + 1
    return out


def _report(path: Path, out: Path) -> set[Incident]:
    _cli("report", str(path), "-o", str(out))
    cells = r'<tr><td><span class="st-badge"[^>]*>(\w+)</span></td><td><code>(\w+)</code></td><td>([^<]*)</td>'
    rows = re.findall(cells, out.read_text())
    return {(t, None if s == "–" else int(html.unescape(s).split("–")[0]), sev.lower()) for sev, t, s in rows}


def views(path: Path, tmp: Path) -> dict[str, set[Incident]]:
    """The incidents each view shows of the run or log at `path`."""
    (truth,) = incidents_at(path)
    out = {"run_incidents": _of([f.to_dict() for f in truth.findings])}
    out["diagnose"] = _of(json.loads(_cli("diagnose", str(path), "--json", "--min-severity", "info"))["findings"])
    _, inputs = write_compare((str(path), str(path)), str(tmp / "compare.html"))
    out["compare"] = _of([f.to_dict() for f in inputs[0].findings])
    table = _cli("compare", str(path), str(path), "-o", str(tmp / "compare.html"))
    loud = sum(sev != "info" for *_, sev in out["run_incidents"])
    assert re.search(rf"findings ≥ warning\s+│\s+{loud}\s+│\s+{loud}", table), table
    out["report"] = _report(path, tmp / "report.html")
    if path.is_file():
        return out
    show = json.loads(_cli("show", str(path), "--json"))
    out["show"] = _of(show["findings_list"])
    assert show["findings"] == {sev: _counts(out["run_incidents"]).get(sev, 0) for sev in show["findings"]}
    (listed,) = json.loads(_cli("runs", str(path), "--json"))
    assert listed["findings"] == show["findings"]
    snap = Incidents(str(path), None, 1000).fill(tail.read(path))
    out["watch"] = _of(snap.findings)
    assert snap.counts == _counts(out["run_incidents"])
    frame = _cli("watch", str(path), "--once")
    counts = ", ".join(f"{n} {sev}" for sev, n in sorted(snap.counts.items(), key=lambda kv: -_RANK[kv[0]]))
    assert f"findings ({counts})" in frame, frame
    app = App([path])
    _, _, body = app.handle("GET", "/api/events", f"run={path.name}")
    out["dashboard"] = _of(json.loads(body)["findings"])
    _, _, body = app.handle("GET", "/api/runs")
    (row,) = json.loads(body)["runs"]
    assert {k: v for k, v in row["findings"].items() if v} == _counts(out["run_incidents"])
    return out


_RANK = {"info": 0, "warning": 1, "error": 2, "critical": 3}


def _agree(seen: dict[str, set[Incident]]) -> set[Incident]:
    truth = seen["run_incidents"]
    assert truth, "the run has incidents to compare"
    for view, incidents in seen.items():
        assert incidents == truth, (view, incidents ^ truth)
    return truth


def test_a_finished_run(tmp_path):
    with Monitor(tmp_path / "run", strict=True) as mon:
        _record(mon, _curve())
    truth = _agree(views(tmp_path / "run", tmp_path))
    assert ("nan", NAN_AT, "critical") in truth and ("loss_spike", SPIKE_AT) in {i[:2] for i in truth}


def test_a_live_run(tmp_path):
    with Monitor(tmp_path / "run", strict=True, flush_interval=0.05) as mon:
        _record(mon, _curve()[:200])
        mon.flush()
        truth = _agree(views(tmp_path / "run", tmp_path))
    assert ("nan", NAN_AT, "critical") in truth


def test_an_imported_log_and_the_log_itself(tmp_path):
    log = _hf_log(tmp_path / "trainer_state.json")
    _cli("import", str(log), "--into", str(tmp_path / "imported"))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    imported = _agree(views(tmp_path / "imported", tmp_path / "a"))
    foreign = _agree(views(log, tmp_path / "b"))
    assert imported == foreign and ("nan", NAN_AT + 1, "critical") in foreign  # HF counts from 1


def test_a_run_that_rolled_back(tmp_path):
    from tests.act import recovery_loop as loop

    run = loop.train(tmp_path / "fault", "diverge")
    (rb,) = run["mon"].recovery.rollbacks
    truth = _agree(views(tmp_path / "fault" / "run", tmp_path))
    (d,) = json.loads(_cli("diagnose", str(tmp_path / "fault" / "run"), "--json"))["findings"][:1]
    assert (d["type"], d["step"]) in {i[:2] for i in truth}
    # the incident that caused it, at its step, or the LR jump that caused that, owning it as a symptom (trust-4)
    assert (rb["type"], rb["onset"]) in {(d["type"], d["step"])} | {(s["type"], s["step"]) for s in d["symptoms"]}
    assert d["evidence"]["rollback"] == 1
    assert d["evidence"]["rolled_back_to"] == rb["restored"] and d["evidence"]["rollback_outcome"] == "recovered"
    assert f"rolled back to step {rb['restored']} because of it (rollback 1" in d["message"]
