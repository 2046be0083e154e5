"""An incident the run graded error when it was first paged (the rules had opened it as a warning) is not
'escalated' to error later: the demo's diverge@150 printed '[ERROR] loss spike' then '[ERROR, ESCALATED] ... now
error'. An escalation past what was sent still goes out."""

from __future__ import annotations

from stethoscope.act.alert import Alert
from stethoscope.act.truth import Truth
from stethoscope.records import Finding

KEY = "stethoscope/run-0/r0/update_ratio@150"


def _alert(kind: str, severity: str) -> Alert:
    return Alert(kind, KEY, "update_ratio", severity, 150, 0, "update ratio at step 150 (streaming)")


def test_an_escalation_to_the_severity_already_paged_is_held_one_above_it_goes_out() -> None:
    graded = ["error"]
    spike = Finding("loss_spike", "error", 151, "loss spiked", symptoms=[{"type": "update_ratio", "step": 150}])
    truth = Truth("run", 0, ["warning"], incidents=lambda: [spike])
    (sent,), _ = truth.settle([(0, _alert("trigger", "warning"))], 5.0)
    assert (sent[1].kind, sent[1].severity) == ("trigger", "error")
    sent, held = truth.settle([(0, _alert("escalate", "error"))], 5.0)
    assert sent == [] and "already paged at error" in held[0][2]
    spike.severity = graded[0] = "critical"
    (sent,), _ = truth.settle([(0, _alert("escalate", "critical"))], 5.0)
    assert (sent[1].kind, sent[1].severity) == ("escalate", "critical")
    (sent,), _ = truth.settle([(0, _alert("resolve", "critical"))], 5.0)
    assert sent[1].kind == "resolve"
