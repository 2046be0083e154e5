"""A hang the watchdog reported is one incident: the step that held it is not also a stall or a slowdown,
in a real Monitor (watchdog thread, writer thread, live detectors, alert rules)."""

from __future__ import annotations

import json
import time

from stethoscope import Monitor
from stethoscope.probe import ProbeConfig
from stethoscope.store.query import open_run
from stethoscope.testing import MemoryChannel

FAST = ProbeConfig(hang_floor_s=0.6, hang_sample_s=0.2, hang_max_snapshots=2, faulthandler=False)
# a floor far above the pause: a loaded machine that stretches a 0.3 s pause past 0.6 s makes no hang of it
PATIENT = ProbeConfig(hang_floor_s=5.0, hang_sample_s=0.2, hang_max_snapshots=2, faulthandler=False)


def _run(path, hang_s: float, probe: ProbeConfig = FAST) -> list:
    mem = MemoryChannel()
    with Monitor(path, serve=probe, alerts=[mem], strict=True) as mon:
        for step in range(30):
            time.sleep(0.02)
            mon.step(step, loss=1.0 / (step + 1))
        time.sleep(hang_s)
        for step in range(30, 60):
            time.sleep(0.02)
            mon.step(step, loss=1.0 / (step + 1))
    return mem.sent


def _slow_steps(rows: list) -> set[int]:
    """The steps the throughput findings blame: each stall, each slowdown's onset."""
    out: set[int] = set()
    for kind, step, data in rows:
        ev = json.loads(data).get("evidence", {})
        if kind == "periodic_stall":
            out |= set(ev.get("dip_steps", []))
        elif kind == "throughput_drop":
            out.add(step)  # where it began (a busy test machine may have slowed the steps around the hang)
    return out


def test_a_hang_is_paged_once_and_its_step_is_no_stall(tmp_path):
    sent = _run(tmp_path / "run", 2.0)
    with open_run(tmp_path / "run") as r:
        _, rows = r.query("SELECT type, step, data FROM findings ORDER BY id")
    assert ("hang", 29) in {(t, s) for t, s, _ in rows}, rows
    assert 30 not in _slow_steps(rows), rows  # the step that held the hang (a busy machine may slow others)
    assert [a.type for a in sent if a.kind in ("trigger", "escalate")] == ["hang"]


def test_the_same_pause_below_the_hang_timeout_is_a_slow_step(tmp_path):
    _run(tmp_path / "run", 0.3, PATIENT)  # under the hang floor: no hang, so the slow step is the throughput's
    with open_run(tmp_path / "run") as r:
        _, rows = r.query("SELECT type, step, data FROM findings ORDER BY id")
    assert "hang" not in {t for t, *_ in rows}
    # the step that held the pause (30), or the one before it when the machine's load blurred the onset by a record
    assert _slow_steps(rows) & {29, 30}, rows
