"""Incidents: a root cause owns its symptoms, streaming, with state that survives a resume."""

from __future__ import annotations

from stethoscope.detect.config import DetectConfig
from stethoscope.detect.registry import DetectorSet, merge_findings
from stethoscope.findings.catalogue import CATALOGUE, FINDING_TYPES
from stethoscope.findings.incidents import IncidentBook
from stethoscope.records import Finding, StepRecord


def _f(type_, step, sev="warning", source="spike", **kw):
    return Finding(type_, sev, step, f"{type_} at {step}", source=source, **kw)


def test_catalogue_lists_every_documented_type_once():
    assert list(CATALOGUE) == list(FINDING_TYPES) and len(set(FINDING_TYPES)) == len(FINDING_TYPES)


def test_divergence_owns_later_symptoms_and_lists_them():
    book = IncidentBook(lead_steps=5)
    (div,) = book.process([_f("divergence", 100, "error", "trend")])
    assert div.symptoms == []
    (updated,) = book.process([_f("grad_explosion", 111)])
    assert updated.type == "divergence" and updated.symptoms == [{"type": "grad_explosion", "step": 111}]
    assert "grad explosion at 111" in updated.message
    # the same symptom type again is evidence, not news: nothing is re-emitted, nothing reported
    assert book.process([_f("grad_explosion", 400)]) == []
    # a NaN that follows raises the incident to critical
    (crit,) = book.process([_f("nan", 700, "critical", "nonfinite")])
    assert crit.severity == "critical" and [s["type"] for s in crit.symptoms] == ["grad_explosion", "grad_explosion", "nan"]
    # something the root does not own is reported on its own
    other = _f("throughput_drop", 500, source="throughput")
    assert book.process([other]) == [other]


def test_symptom_reported_before_its_root_is_withdrawn_and_claimed():
    book = IncidentBook(lead_steps=5)
    spike = _f("loss_spike", 602)
    assert book.process([spike]) == [spike]
    withdrawn, div = book.process([_f("divergence", 602, "error", "trend")])
    assert withdrawn.type == "loss_spike" and withdrawn.evidence["withdrawn"] is True
    assert div.symptoms == [{"type": "loss_spike", "step": 602}]
    merged = [f for f in merge_findings([spike, withdrawn, div]) if not f.evidence.get("withdrawn")]
    assert [f.type for f in merged] == ["divergence"]
    # the spike's own follow-up (recovered partly) stays folded
    assert book.process([_f("loss_spike", 602, end_step=900)]) == []


def test_a_fully_recovered_incident_stops_owning():
    book = IncidentBook(lead_steps=5)
    book.process([_f("divergence", 100, "error", "trend")])
    closed = Finding("divergence", "error", 100, "diverged; recovered", end_step=300, source="trend",
                     evidence={"recovered": "fully"})
    (out,) = book.process([closed])
    assert out.end_step == 300
    assert [f.type for f in book.process([_f("loss_spike", 200)])] == ["divergence"]  # inside the span: owned
    late = _f("loss_spike", 400)
    assert book.process([late]) == [late]  # after recovery: a new incident's news


def test_an_unrecovered_incident_owns_to_the_end():
    book = IncidentBook(lead_steps=5)
    book.process([_f("divergence", 100, "error", "trend")])
    book.process([Finding("divergence", "error", 100, "diverged", end_step=300, source="trend",
                          evidence={"recovered": "partly"})])
    assert book.process([_f("grad_explosion", 5000)])  # re-emits the root, not a new warning
    assert all(f.type == "divergence" for f in book.process([_f("loss_spike", 6000)]))


def test_a_recovered_spike_before_the_onset_is_its_own_incident():
    book = IncidentBook(lead_steps=50)
    early = Finding("loss_spike", "warning", 60, "spike; recovered", end_step=70, source="spike",
                    evidence={"recovered": "fully"})
    book.process([early])
    (div,) = book.process([_f("divergence", 100, "error", "trend")])
    assert div.symptoms == []


def test_incident_state_round_trips():
    book = IncidentBook(lead_steps=5)
    book.process([_f("divergence", 100, "error", "trend"), _f("loss_spike", 150)])
    again = IncidentBook(lead_steps=5)
    again.load_state_dict(book.state_dict())
    (out,) = again.process([_f("grad_explosion", 170)])
    assert [s["type"] for s in out.symptoms] == ["loss_spike", "grad_explosion"]
    assert again.process([_f("loss_spike", 150)]) == []  # a follow-up of a folded symptom


def test_streaming_lr_blowup_is_one_incident():
    """A real detector stream: LR x30 at step 300 makes the loss and grad norm jump and stay up."""
    import math
    import random

    rng = random.Random(0)
    ds = DetectorSet(config=DetectConfig())
    out = []
    for s in range(800):
        high = s >= 300
        loss = (2.0 + 1.0 * math.exp(-s / 100)) * (2.5 if high else 1.0) + rng.gauss(0, 0.02)
        gn = (12.0 if high else 1.0) * (1 + rng.gauss(0, 0.1)) * (3 if s in (310, 520) else 1)
        lr = 0.09 if high else 0.003
        out += ds.update(StepRecord(s, {"train/loss": loss, "grad/norm": gn, "opt/lr": lr}))
    out += ds.finish()
    final = [f for f in merge_findings(out) if not f.evidence.get("withdrawn")]
    loud = [f for f in final if f.severity != "info"]
    assert [f.type for f in loud] == ["divergence"], [(f.type, f.step, f.message) for f in loud]
    assert loud[0].symptoms, "the jump's spikes are the divergence's symptoms"


def test_every_problem_type_has_advice_and_charts_that_exist():
    from stethoscope.findings.advice import ADVICE
    from stethoscope.report.html import CHARTS

    chart_ids = {c.id for c in CHARTS}
    missing = [t for t in CATALOGUE if t not in ADVICE and t not in ("healthy", "straggler")]
    assert not missing, f"finding types without causes/fixes: {missing}"
    for t in CATALOGUE.values():
        assert set(t.charts) <= chart_ids, (t.name, t.charts)


def test_a_root_that_turns_out_a_note_releases_what_it_claimed():
    """A loss jump first reported as a warning, then found to sit at a resume (expected, info): the NaN
    it had claimed is critical news of its own again."""
    book = IncidentBook(lead_steps=5)
    book.process([_f("loss_spike", 200)])
    assert [f.type for f in book.process([_f("nan", 201, "critical", "nonfinite")])] == ["loss_spike"]
    note = Finding("loss_spike", "info", 200, "expected at a restart", source="spike", evidence={"expected": True})
    out = book.process([note])
    assert [(f.type, f.severity) for f in out] == [("loss_spike", "info"), ("nan", "critical")]
    assert not out[1].evidence.get("withdrawn")
