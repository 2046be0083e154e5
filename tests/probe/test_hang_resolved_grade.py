"""A hang that resolved (the run went on) is graded by its cost, not by the page it made (user-trial-2 item 6):
the page was right when it fired and stays critical in the alert history; the finding after the resolution
says resolved and is a warning, in the store and in the diagnosis."""

from __future__ import annotations

import json
import time

from stethoscope import Monitor
from stethoscope.diagnose.stored import incidents_at
from stethoscope.probe import ProbeConfig
from stethoscope.store.query import open_run
from stethoscope.testing import MemoryChannel

FAST = ProbeConfig(hang_floor_s=0.6, hang_sample_s=0.2, hang_max_snapshots=3, faulthandler=False)


def test_a_resolved_hang_is_a_warning_after_a_critical_page(tmp_path):
    mem = MemoryChannel()
    with Monitor(tmp_path / "run", serve=FAST, alerts=[mem], strict=True) as mon:
        for step in range(10):
            mon.step(step, loss=1.0 / (step + 1))
        time.sleep(2.0)  # a stuck data loader
        for step in range(10, 13):
            mon.step(step, loss=0.1)
        mon.flush()
        time.sleep(1.2)  # the watchdog sees the steps move again on its next tick
        for step in range(13, 20):
            mon.step(step, loss=0.1)
    with open_run(tmp_path / "run") as r:
        _, rows = r.query("SELECT data FROM findings WHERE type = 'hang' ORDER BY id")
    opened, resolved = (json.loads(row[0]) for row in rows)
    assert opened["severity"] == "critical"  # while it lasted the run was at stake
    assert resolved["severity"] == "warning" and "hang resolved" in resolved["message"]
    assert "critical while it lasted" in resolved["message"]
    assert resolved["evidence"]["severity_while_open"] == "critical"
    hangs = [(a.kind, a.severity) for a in mem.sent if a.type == "hang"]
    assert hangs == [("trigger", "critical"), ("resolve", "critical")]  # the page history keeps its grade
    (d,) = incidents_at(tmp_path / "run")
    (hang,) = [f for f in d.findings if f.type == "hang"]
    assert hang.severity == "warning" and "hang resolved" in hang.message, (hang.severity, hang.message)
