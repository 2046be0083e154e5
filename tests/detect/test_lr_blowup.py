"""An LR multiplied x50 mid-run: one LR jump (not one per step after it), an update-ratio warning at
the jump's step (before the loss moves), and instabilities that follow name the jump as their cause."""

from __future__ import annotations

import math

from stethoscope.detect.registry import DetectorSet, merge_findings
from stethoscope.findings.links import link_causes
from stethoscope.records import LOSS, LR, UPDATE_RATIO, StepRecord


def _lr(step: int) -> float:
    base = 1e-3 * (0.5 + 0.5 * math.cos(math.pi * step / 1000))
    return base * (50 if step >= 300 else 1)


def _records():
    for s in range(400):
        values = {LR: _lr(s), LOSS: 2.0 + 0.01 * ((s * 7) % 5) + (1.5 if s >= 301 else 0.0)}
        if s % 10 == 0:
            values[UPDATE_RATIO] = 1e-3 * (0.9 + 0.02 * ((s * 3) % 7)) * (30 if s >= 300 else 1)
        yield StepRecord(s, values)


def test_lr_blowup():
    ds = DetectorSet()
    found = []
    for r in _records():
        found += ds.update(r)
    found = merge_findings(found + ds.finish())
    jumps = [f for f in found if f.type == "lr_schedule" and "jumped" in f.message]
    assert [f.step for f in jumps] == [300]
    ratio = [f for f in found if f.type == "update_ratio"]
    assert ratio and ratio[0].step == 300 and ratio[0].severity == "warning"
    link_causes(found)
    later = [f for f in found if f.type in ("loss_spike", "divergence") and f.step == 301]
    assert later
    for f in later:
        named = [c for c in f.causes if "LR jumped" in c and "step 300" in c]
        assert len(named) == 1 and f.causes.index(named[0]) <= 1, f.causes
