"""The live side of the one rule that grades a divergence by the records after its jump (`detect.sustained`): held
at warning while fewer than SUSTAINED records show it, raised to its error once they do, info once they show it
came back; a rollback's abandoned records are dropped, as the store supersedes them."""

from __future__ import annotations

from stethoscope.detect.sustained import SUSTAINED, SustainedGate
from stethoscope.records import LOSS, Finding, StepRecord

JUMP = 40


def _divergence() -> Finding:
    return Finding("divergence", "error", JUMP, "loss jumped at step 40 (1 -> 5) and had not come back",
                   evidence={"level_before": 1.0}, source="spike")


def _feed(gate: SustainedGate, values: dict[int, float], emit_at: int) -> list[Finding]:
    out = []
    for step, v in values.items():
        out += gate.update(StepRecord(step, {LOSS: v}), [_divergence()] if step == emit_at else [])
    return out


def _steady() -> dict[int, float]:
    return {s: 1.0 + 0.01 * (s % 3) for s in range(JUMP)}


def test_held_at_warning_then_raised_once_sustained():
    gate = SustainedGate()
    out = _feed(gate, {**_steady(), 40: 5.0, 41: 5.2}, emit_at=41)
    assert [f.severity for f in out] == ["warning"] and "not sustained yet" in out[0].message
    more = _feed(gate, {42: 5.1, 43: 5.3}, emit_at=-1)
    assert [f.severity for f in more] == ["error"] and more[0].step == JUMP
    assert SUSTAINED == 3


def test_held_then_info_when_it_came_back():
    gate = SustainedGate()
    out = _feed(gate, {**_steady(), 40: 5.0, 41: 5.2, 42: 1.0, 43: 1.01}, emit_at=41)
    assert [f.severity for f in out] == ["warning", "info"] and "came back" in out[-1].message


def test_a_rollback_drops_the_abandoned_records():
    gate = SustainedGate()
    _feed(gate, {**_steady(), 40: 5.0, 41: 5.2, 42: 5.1}, emit_at=-1)
    gate.update(StepRecord(30, {LOSS: 1.0}), [])  # restored to step 30
    assert gate.state_dict()["steps"][-1] == 30 and max(gate.state_dict()["steps"]) == 30
