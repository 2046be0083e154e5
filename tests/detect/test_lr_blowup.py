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


def _nan_run(lr_jump: bool, log_every: int = 10):
    """A run logged every `log_every` steps whose loss goes from a normal row straight to NaN at step 500
    (the finite climb fell between two rows), with or without an LR pushed x100 at step 490."""
    for s in range(0, 800, log_every):
        lr = 1e-3 * (100 if lr_jump and s >= 490 else 1)
        loss = 2.0 + 0.01 * ((s * 7) % 5) if s < 500 else math.nan
        yield StepRecord(s, {LR: lr, LOSS: loss})


def _settled(records) -> list:
    ds = DetectorSet()
    found = []
    for r in records:
        found += ds.update(r)
    return [f for f in merge_findings(found + ds.finish()) if not f.evidence.get("withdrawn")]


def test_nan_right_after_an_lr_jump_is_a_divergence_that_owns_the_nan():
    found = _settled(_nan_run(lr_jump=True))
    div = [f for f in found if f.type == "divergence"]
    assert len(div) == 1 and div[0].step == 500 and div[0].severity == "critical"
    assert div[0].evidence["lr_jump_step"] == 490 and div[0].evidence["blew_up"] is True
    assert any("LR jumped" in c for c in div[0].causes)
    assert {"type": "nan", "step": 500} in div[0].symptoms  # one incident: the NaN is its symptom
    assert not [f for f in found if f.type == "nan" and f.severity != "info"]


def test_nan_with_no_lr_jump_stays_a_nan_finding():
    found = _settled(_nan_run(lr_jump=False))
    assert not [f for f in found if f.type == "divergence"]
    assert [f.step for f in found if f.type == "nan"] == [500]
