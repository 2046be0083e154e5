"""act/truth.py: an alert says what the run's incidents say; one they grade below a channel's min_severity does
not page there (nor do its later messages); any failure or a computation past its budget sends the streaming
text and says why."""

from __future__ import annotations

import threading

from stethoscope.act.alert import Alert
from stethoscope.act.truth import RUN_INCIDENTS, Truth, of_alert
from stethoscope.records import Finding

KEY = "stethoscope/run-0/r0/grad_spike@40"


def _alert(kind: str = "trigger", severity: str = "warning", type_: str = "grad_spike", step: int = 40) -> Alert:
    return Alert(kind, KEY, type_, severity, step, 0, f"{type_} at step {step} (streaming)")


def _incident(type_: str, step: int, severity: str, **kw) -> Finding:
    return Finding(type_, severity, step, f"{type_} from the run's incidents", causes=["the cause"],
                   fixes=["the fix"], evidence={"ratio": 3.0}, **kw)


def test_an_alert_is_rendered_from_the_incident_that_owns_its_finding():
    owner = _incident("loss_spike", 41, "error", symptoms=[{"type": "grad_spike", "step": 40}])
    truth = Truth("run", 0, ["warning"], incidents=lambda: [_incident("plateau", 40, "info"), owner])
    (sent,), held = truth.settle([(0, _alert())], 5.0)
    a = sent[1]
    assert held == [] and (a.type, a.step, a.severity, a.basis) == ("loss_spike", 41, "error", RUN_INCIDENTS)
    assert (a.message, a.cause, a.fix, a.evidence, a.key) == (owner.message, "the cause", "the fix",
                                                             {"ratio": "3"}, KEY)


def test_a_page_graded_below_a_channels_floor_is_held_there_with_its_later_messages():
    truth = Truth("run", 0, ["info", "warning"], incidents=lambda: [_incident("grad_spike", 40, "info")])
    sent, held = truth.settle([(0, _alert()), (1, _alert())], 5.0)
    assert [(ch, a.severity) for ch, a in sent] == [(0, "info")]
    assert [(ch, why.split(":")[0]) for ch, _, why in held] == [(1, "held")] and "below this channel's warning" in held[0][2]
    sent, held = truth.settle([(0, _alert("resolve")), (1, _alert("resolve"))], 5.0)
    assert [ch for ch, _ in sent] == [0] and [ch for ch, _, _ in held] == [1]
    assert truth.held == set()  # the incident is over: nothing left held


def test_a_held_incident_that_escalates_past_the_floor_pages_as_a_first_trigger():
    graded = ["info"]
    truth = Truth("run", 0, ["error"], incidents=lambda: [_incident("grad_spike", 40, graded[0])])
    assert truth.settle([(0, _alert())], 5.0)[0] == []
    graded[0] = "error"
    (sent,), _ = truth.settle([(0, _alert("escalate", "error"))], 5.0)
    assert (sent[1].kind, sent[1].severity) == ("trigger", "error") and sent[1].note.startswith("escalated")


def test_a_failure_sends_the_streaming_text_and_says_why(caplog):
    def broken() -> list[Finding]:
        raise RuntimeError("store unreadable")

    truth = Truth("run", 0, ["warning"], incidents=broken)
    (sent,), held = truth.settle([(0, _alert())], 5.0)
    assert held == [] and sent[1].message == "grad_spike at step 40 (streaming)"
    assert sent[1].basis == "streaming finding: RuntimeError: store unreadable" and truth.fallbacks == 1
    assert "not from the run's incidents" in caplog.text


def test_a_computation_past_its_budget_falls_back_and_the_next_does_not_wait_for_it():
    release = threading.Event()

    def slow() -> list[Finding]:
        release.wait(10)
        return [_incident("grad_spike", 40, "info")]

    truth = Truth("run", 0, ["warning"], incidents=slow, wait_durable=lambda timeout: False)
    try:
        (sent,), _ = truth.settle([(0, _alert())], 0.2)
        assert sent[1].basis.startswith("streaming finding: TimeoutError: computing the run's incidents took")
        (sent,), _ = truth.settle([(0, _alert("escalate", "error"))], 0.2)
        assert "still running" in sent[1].basis
    finally:
        release.set()
        truth._busy.join(5)
    (sent,), _ = truth.settle([(0, _alert("resolve"))], 0.2)  # done by now, but past the budget once: not again
    assert "not tried again" in sent[1].basis


def test_a_critical_alert_not_among_the_incidents_goes_out_as_found():
    truth = Truth("run", 0, ["warning"], incidents=lambda: [_incident("grad_spike", 400, "error")])
    (sent,), _ = truth.settle([(0, _alert(severity="critical"))], 5.0)
    assert sent[1].basis == "streaming finding: not among the run's incidents" and sent[1].severity == "critical"
    assert of_alert([_incident("grad_spike", 60, "error", end_step=None)], _alert()).step == 60  # within 50 steps


def test_an_alert_about_the_runs_own_rollback_is_sent_as_written_without_a_fallback(caplog):
    truth = Truth("run", 0, ["warning"], incidents=lambda: [_incident("loss_spike", 151, "error")])
    (sent,), held = truth.settle([(0, _alert(type_="rollback", step=151))], 5.0)
    assert held == [] and sent[1].type == "rollback" and sent[1].basis.startswith("the run's own event")
    assert truth.fallbacks == 0 and "streaming finding" not in caplog.text


def test_a_live_warning_the_incidents_do_not_hold_is_held_with_its_later_messages():
    """user-trial-3: a live `[ERROR] divergence at step 444` (a noisy 0.02 -> 0.06 -> 0.12 then back) paged
    through a torchrun run while `diagnose`, `show` and the dashboard of the same store never reported it."""
    incidents = [[_incident("nan", 450, "critical")]]
    truth = Truth("run", 0, ["warning"], incidents=lambda: incidents[0])
    sent, held = truth.settle([(0, _alert(severity="error", type_="divergence", step=444))], 5.0)
    assert sent == [] and held[0][2].startswith("held: not among the run's incidents")
    sent, held = truth.settle([(0, _alert("stop", "error", "divergence", 444))], 5.0)
    assert sent == [] and len(held) == 1 and truth.held == set()
    incidents[0] = [_incident("divergence", 444, "error")]  # once the incidents hold it, a later page goes out
    truth = Truth("run", 0, ["warning"], incidents=lambda: incidents[0])
    (sent,), _ = truth.settle([(0, _alert(severity="error", type_="divergence", step=444))], 5.0)
    assert sent[1].basis == RUN_INCIDENTS
