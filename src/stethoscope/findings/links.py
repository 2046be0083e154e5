"""Causes that connect two findings: an instability right after the LR was pushed up names that jump."""

from __future__ import annotations

from collections.abc import Sequence

from stethoscope.findings.catalogue import (
    DIVERGENCE, GPU_THROTTLE, GRAD_EXPLOSION, GRAD_SPIKE, LOSS_SCALE_COLLAPSE, LOSS_SPIKE, LR_SCHEDULE, NAN,
    PERIODIC_STALL, STRAGGLER, THROUGHPUT_DROP, UPDATE_RATIO,
)
from stethoscope.records import Finding

# Findings an LR increase can cause, and how soon after the jump they must start (in steps).
LR_EFFECTS = frozenset({LOSS_SPIKE, DIVERGENCE, GRAD_SPIKE, GRAD_EXPLOSION, NAN, LOSS_SCALE_COLLAPSE,
                        UPDATE_RATIO})
LR_WINDOW_STEPS = 10
LR_UP_REL = 0.5  # an LR jump of +50% or more counts


def link_causes(findings: Sequence[Finding]) -> None:
    """Prepend (in place) "LR jumped … just before" to the causes of instabilities that follow one, and a
    GPU's throttle episode to the causes of the slowdown it overlaps."""
    link_throttles(findings)
    jumps = [f for f in findings if f.type == LR_SCHEDULE and f.step is not None
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


# Slowdowns a throttled GPU explains: a drop or stall on its rank, a straggler (the slow rank's GPU).
THROTTLE_EFFECTS = frozenset({THROUGHPUT_DROP, PERIODIC_STALL, STRAGGLER})


def link_throttles(findings: Sequence[Finding]) -> None:
    """A slowdown that overlaps a `gpu_throttle` episode names that GPU and its reason as the first cause."""
    episodes = [f for f in findings if f.type == GPU_THROTTLE and f.step is not None]
    for f in findings:
        if f.type not in THROTTLE_EFFECTS or f.step is None:
            continue
        end = f.end_step if f.end_step is not None else f.step
        for ep in episodes:
            ep_end = ep.end_step if ep.end_step is not None else float("inf")
            if ep.step <= end and f.step <= ep_end:  # type: ignore[operator]
                dev, reasons = ep.evidence.get("device"), ep.evidence.get("reasons") or []
                cause = f"GPU {dev} throttled ({' and '.join(reasons)}) during this slowdown: {ep.message}"
                if not any(c.startswith(f"GPU {dev} throttled") for c in f.causes):
                    f.causes.insert(0, cause)
                    f.evidence["gpu_throttle"] = {"device": dev, "reasons": list(reasons), "step": ep.step}
                break
