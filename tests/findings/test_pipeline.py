"""The pipeline's pure parts: recorded and replayed findings combined, a rollback's cause marked."""

from __future__ import annotations

from stethoscope.findings.incidents import with_rollbacks
from stethoscope.findings.pipeline import combine
from stethoscope.records import Finding


def _f(type_, step, sev="warning", source="spike", **kw):
    return Finding(type_, sev, step, f"{type_} at {step}", source=source, **kw)


def test_the_recorded_word_wins_and_the_replay_adds_what_nobody_said():
    recorded = [_f("loss_spike", 151, "error"), _f("throughput_drop", 55, source="throughput", end_step=130)]
    replayed = [
        _f("loss_spike", 151, "warning"),  # the same key: the recorded one (with the run's thresholds) wins
        _f("grad_spike", 160),  # owned by the recorded spike's incident (not recovered: open)
        _f("throughput_drop", 70, source="throughput"),  # inside the recorded slowdown: the same event
        _f("memory_leak", 400, source="memory"),  # nobody said it: added
    ]
    out = combine(recorded, replayed, lead_steps=20)
    assert [(f.type, f.step, f.severity) for f in out] == [
        ("loss_spike", 151, "error"), ("throughput_drop", 55, "warning"), ("memory_leak", 400, "warning")]
    assert out[0].symptoms == [{"type": "grad_spike", "step": 160}] and "symptoms: grad spike at 160" in out[0].message


def test_a_symptom_only_the_replay_saw_raises_the_recorded_incident():
    recorded = [_f("divergence", 100, "error", "trend")]  # not recovered: it owns what follows
    (div,) = combine(recorded, [_f("nan", 400, "critical", "nonfinite")], lead_steps=20)
    assert div.severity == "critical" and div.symptoms == [{"type": "nan", "step": 400}]


def test_a_replayed_finding_far_from_the_recorded_one_of_its_type_is_its_own():
    recorded = [_f("periodic_stall", 50, "info", "throughput")]
    replayed = [_f("periodic_stall", 65, "info", "throughput"), _f("periodic_stall", 300, "info", "throughput")]
    assert [f.step for f in combine(recorded, replayed, lead_steps=20)] == [50, 300]


def test_a_rollback_marks_its_cause_with_what_was_done_and_how_it_ended():
    actions = [(178, {"action": "rollback", "rollback": 1, "onset": 151, "type": "loss_spike", "restored": 140,
                      "skip": [141, 170], "lr_factor": 0.5, "reason": "loss spike at step 151 not back"}),
               (198, {"action": "recovered", "rollback": 1, "loss": 2.47, "level_before": 2.26})]
    other = _f("update_ratio", 150, source="gradients")
    (cause, kept) = with_rollbacks([_f("loss_spike", 151, "error"), other], actions)
    assert kept is other
    assert cause.evidence["rollback"] == 1 and cause.evidence["rolled_back_to"] == 140
    assert cause.evidence["rollback_outcome"] == "recovered" and cause.end_step == 178
    assert "rolled back to step 140 because of it (rollback 1 at step 178: batches 141-170 skipped, LR x0.5)" \
        in cause.message and "recovered (loss 2.47, 2.26 before the incident)" in cause.message


def test_a_rollback_whose_cause_was_not_recorded_still_reports_it():
    actions = [(130, {"action": "rollback", "rollback": 1, "onset": 120, "type": "divergence", "restored": 100,
                      "reason": "divergence at step 120"}),
               (300, {"action": "gave_up", "rollback": 1, "reason": "max_rollbacks 1 reached"})]
    (f,) = with_rollbacks([], actions)
    assert (f.type, f.step, f.severity) == ("divergence", 120, "warning")
    assert f.evidence["rollback_outcome"] == "gave_up" and "recovery gave up: max_rollbacks 1" in f.message
