"""One stop of learning is one incident: a loss scale collapsed to its floor (every update skipped) owns the
frozen eval loss and the plateau that follow it; a frozen loss owns a later frozen loss of another series."""

from __future__ import annotations

from stethoscope.findings.incidents import IncidentBook
from stethoscope.records import Finding


def _f(kind: str, step: int, severity: str = "warning", source: str = "x") -> Finding:
    return Finding(kind, severity, step, f"{kind} at {step}", source=source)


def test_a_collapsed_loss_scale_owns_the_frozen_eval_loss_after_it() -> None:
    book = IncidentBook(lead_steps=50)
    out = book.process([_f("loss_scale_collapse", 550, "error", "amp")])
    out += book.process([_f("frozen_loss", 600, "warning", "overfit"), _f("plateau", 640, "info", "trend")])
    shown = [f for f in out if not f.evidence.get("withdrawn")]
    assert {f.type for f in shown} == {"loss_scale_collapse"}
    last = shown[-1]
    assert last.step == 550 and {s["type"] for s in last.symptoms} == {"frozen_loss", "plateau"}


def test_the_train_loss_repeating_after_the_eval_loss_did_is_the_same_stop() -> None:
    book = IncidentBook(lead_steps=50)
    out = book.process([_f("frozen_loss", 13, "warning", "overfit")])
    out += book.process([_f("frozen_loss", 16, "error", "trend")])
    shown = [f for f in out if not f.evidence.get("withdrawn")]
    assert {(f.type, f.step) for f in shown} == {("frozen_loss", 13)}
    assert shown[-1].severity == "error"  # raised by what it owns
