"""The words of a spike's findings: a loss spike, its divergence, a grad-norm spike or explosion, and a
jump at a resume marked expected. Used by `detect.spike`."""

from __future__ import annotations

import math
from typing import Any

from stethoscope.detect.comeback import recovered_fraction
from stethoscope.findings.catalogue import DIVERGENCE, GRAD_EXPLOSION, GRAD_SPIKE, LOSS_SPIKE
from stethoscope.records import Finding


def grad_finding(inc: dict[str, Any], source: str) -> Finding:
    ratio = inc["peak"] / inc["level"]
    ev = {
        "level": inc["level"], "first": inc["first"], "peak": inc["peak"], "peak_step": inc["peak_step"],
        "ratio": ratio, "sigma": inc["sigma"], "history": inc["n"], "records": inc["elevated"],
    }
    if inc["escalated"]:
        sev = "error" if inc["loss_followed"] else "warning"
        why = "and the loss followed" if inc["loss_followed"] else f"and kept rising over {inc['elevated']} records"
        msg = (f"grad norm exploded from {g(inc['level'])} to {g(inc['peak'])} (x{ratio:.3g}) "
               f"starting at step {inc['start']}, {why}")
        return Finding(GRAD_EXPLOSION, sev, inc["start"], msg, evidence=ev, source=source)
    msg = f"grad norm spiked to {g(inc['first'])}, x{inc['first'] / inc['level']:.3g} its level {g(inc['level'])}"
    if inc["warmup"]:
        msg += " (LR still in warm-up: grad norms are high and jumpy there)"
    return Finding(GRAD_SPIKE, "info", inc["start"], msg, evidence=ev, source=source)


def loss_finding(inc: dict[str, Any], source: str) -> Finding:
    ratio = inc["first"] / inc["level"] if inc["level"] else math.inf
    ev = {
        "level": inc["level"], "value": inc["first"], "ratio": ratio, "rise": inc["rel"],
        "sigma": inc["sigma"], "z": (inc["first"] - inc["level"]) / inc["sigma"] if inc["sigma"] else math.inf,
        "peak": inc["peak"], "peak_step": inc["peak_step"], "history": inc["n"], "lr": inc["lr"],
    }
    if inc["respikes"]:
        ev["further_spikes_folded"] = inc["respikes"]
    if inc["n"] < 2:  # one record before it: no level and no noise of the run's own to measure a spike by
        msg = (f"loss rose to {g(inc['first'])} at step {inc['start']}, x{ratio:.3g} the one record before it "
               f"({g(inc['level'])}): a run's first records show no level or noise to call it a spike against")
    else:
        msg = (f"loss spiked to {g(inc['first'])} at step {inc['start']}, x{ratio:.3g} its recent level "
               f"{g(inc['level'])} ({ev['z']:.3g} sigma)")
    if inc.get("early_climb"):
        msg += ("; the loss had been climbing since its first record, at that pace: the run's start (an LR "
                "warm-up, a new head on pretrained weights), not a spike from a level")
        ev["early_climb"] = True
    return Finding(LOSS_SPIKE, inc["severity"], inc["start"], msg, evidence=ev,
                   causes=list(inc["causes"]), source=source)


def divergence(inc: dict[str, Any], step: int, source: str) -> Finding:
    ev = {
        "level_before": inc["level"], "peak": inc["peak"], "peak_step": inc["peak_step"],
        "last": inc["last"], "last_step": inc["last_step"], "peak_undone": recovered_fraction(inc),
        "spike_step": inc["start"], "further_spikes_folded": inc["respikes"],
        "detected_step": inc.get("diverged_at"),
    }
    n = step - inc["start"]
    when = f"{n} step{'s' if n != 1 else ''} later" if n > 0 else "by the last record"
    msg = (f"loss jumped at step {inc['start']} ({g(inc['level'])} -> {g(inc['first'])}) and had not come "
           f"back {when} (loss {g(inc['last'])} at step {inc['last_step']})")
    return Finding(DIVERGENCE, "error", inc["start"], msg, evidence=ev,
                   causes=list(inc["causes"]), source=source)


def g(x: float | None) -> str:
    return "?" if x is None else f"{x:.4g}"


def mark_expected(f: Finding, reset: int) -> Finding:
    """A jump at a resume or schedule restart: a note, not an instability."""
    f.severity = "info"
    f.message += (f"; at a resume/LR-schedule restart (step {reset}): expected when the data or "
                  "schedule starts over, not an instability")
    f.causes = [f"resume or schedule restart at step {reset} (new data or a fresh schedule)"]
    f.evidence["expected"] = True
    return f
