"""An update/weight ratio that jumped the step before a loss spike (an LR x100) is the spike's lead-up: one
incident, one page, the ratio listed as its symptom (the rollback demo paged both)."""

from __future__ import annotations

from stethoscope.findings.incidents import IncidentBook
from stethoscope.records import Finding


def test_a_loss_spike_owns_the_update_ratio_jump_just_before_it() -> None:
    book = IncidentBook(lead_steps=50)
    out = book.process([Finding("update_ratio", "warning", 150, "update/weight ratio 0.195", source="gradients")])
    out += book.process([Finding("loss_spike", "error", 151, "loss spiked to 6.48", source="spike")])
    live = [f for f in out if not f.evidence.get("withdrawn")]
    assert live[-1].type == "loss_spike" and {"type": "update_ratio", "step": 150} in live[-1].symptoms
    withdrawn = [f for f in out if f.evidence.get("withdrawn")]
    assert [(f.type, f.step) for f in withdrawn] == [("update_ratio", 150)]
