"""A stall message is true whether the run records perf/gc_pause_s and perf/data_wait_s or not (the demo records both,
and read 'no cause recorded beside it (no eval, perf/gc_pause_s or perf/data_wait_s)'), and scattered slow steps carry
no period in their evidence (their median gap is not one)."""

from __future__ import annotations

import random

from stethoscope.detect.throughput import ThroughputDetector
from stethoscope.records import DATA_WAIT, GC_PAUSE, STEP_TIME, StepRecord

from .conftest import of_type, replay


def test_scattered_slow_steps_beside_recorded_pauses_that_explain_nothing() -> None:
    rng = random.Random(1)
    records = []
    slow = set(rng.sample(range(50, 3000), 150))
    for s in range(3000):
        t = 0.5 * (1 + 0.02 * rng.random()) * (rng.uniform(2.0, 4.0) if s in slow else 1.0)
        records.append(StepRecord(s, {STEP_TIME: t, GC_PAUSE: 0.001, DATA_WAIT: 0.002}))
    stalls = of_type(replay(ThroughputDetector(), records), "periodic_stall")
    scattered = [f for f in stalls if not f.evidence["regular"] and f.evidence["dips"] > 1]
    assert scattered
    for f in scattered:
        assert "no cause recorded" not in f.message and "perf/gc_pause_s" not in f.message
        assert "nothing recorded at those steps explains them" in f.message
        assert f.evidence["period_steps"] is None and f.evidence["median_gap_steps"] > 0


def test_the_record_them_fix_only_where_the_run_does_not_record_them() -> None:
    from stethoscope.findings.advice import advise

    def stall(perf: bool) -> object:
        rng = random.Random(2)
        records = []
        for s in range(400):
            values = {STEP_TIME: 0.5 * (1 + 0.02 * rng.random()) * (3.0 if s % 25 == 0 and s else 1.0)}
            if perf:
                values.update({GC_PAUSE: 0.001, DATA_WAIT: 0.002})
            records.append(StepRecord(s, values))
        (f,) = of_type(replay(ThroughputDetector(), records), "periodic_stall")
        return advise(f)

    recorded, absent = stall(True), stall(False)
    assert recorded.evidence["causes_recorded"] and not absent.evidence["causes_recorded"]
    assert not any("record perf/gc_pause_s" in x for x in recorded.fixes)
    assert any(x.startswith("line the slow steps up") for x in recorded.fixes)
    assert any("record perf/gc_pause_s" in x for x in absent.fixes)
