"""A root that turns out a note releases what it had claimed as its symptoms' latest word, not as they were first
reported (wild-logs-6: an OCR log's spike off its one first print held a divergence open for 47,600 steps; the trend
detector's own divergence inside it, reported as an ERROR and later taken back as a short comeback, came out of the
release as the ERROR again)."""

from __future__ import annotations

from stethoscope.findings.incidents import IncidentBook
from stethoscope.findings.pipeline import settle
from stethoscope.records import Finding


def test_a_released_symptom_is_its_follow_up_not_its_first_report():
    book = IncidentBook(lead_steps=50)
    out = book.process([Finding("divergence", "error", 100, "jumped at 100", source="spike")])
    first = Finding("divergence", "error", 43300, "diverged from 43300", source="trend")
    out += book.process([first])
    assert not [f for f in out if f.step == 43300], "owned by the open root: not reported"
    taken_back = Finding("divergence", "info", 43300, "diverged from 43300; withdrawn: came back at 43600",
                         end_step=43600, source="trend", evidence={"withdrawn": True, "recovered": "fully"})
    out += book.process([taken_back])
    note = Finding("divergence", "info", 100, "jumped at 100; withdrawn: came back", end_step=47700, source="spike",
                   evidence={"withdrawn": True, "recovered": "fully"})
    out += book.process([note])
    released = [f for f in out if f.step == 43300]
    assert released and released[-1].severity == "info" and released[-1].evidence.get("withdrawn"), released
    assert not [f for f in settle(out) if f.severity != "info"], [(f.type, f.step, f.severity) for f in settle(out)]
