"""Causes that connect two findings: an instability right after the LR was pushed up names that jump."""

from __future__ import annotations

from collections.abc import Sequence

from stethoscope.records import Finding

# Findings an LR increase can cause, and how soon after the jump they must start (in steps).
LR_EFFECTS = frozenset({"loss_spike", "divergence", "grad_spike", "grad_explosion", "nan", "loss_scale_collapse",
                        "update_ratio"})
LR_WINDOW_STEPS = 10
LR_UP_REL = 0.5  # an LR jump of +50% or more counts


def link_causes(findings: Sequence[Finding]) -> None:
    """Prepend (in place) "LR jumped … just before" to the causes of instabilities that follow one."""
    jumps = [f for f in findings if f.type == "lr_schedule" and f.step is not None
             and _up(f.evidence.get("relative_change")) >= LR_UP_REL]
    for f in findings:
        if f.type not in LR_EFFECTS or f.step is None or any("LR jumped" in c for c in f.causes):
            continue  # not caused by an LR change, or the detector already named the jump
        for j in jumps:
            if 0 <= f.step - j.step <= LR_WINDOW_STEPS:  # type: ignore[operator]
                cause = (f"LR jumped x{1 + _up(j.evidence['relative_change']):.3g} at step {j.step} "
                         f"({j.evidence.get('lr_before'):.3g} -> {j.evidence.get('lr_after'):.3g}) just before: "
                         "the learning rate is too high for this stage")
                if cause not in f.causes:
                    f.causes.insert(0, cause)
                break


def _up(rel: object) -> float:
    return float(rel) if isinstance(rel, (int, float)) else 0.0
