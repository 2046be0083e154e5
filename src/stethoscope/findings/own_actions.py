"""What stethoscope itself did to a run, recognised from its own records rather than guessed from the metrics.

A rollback (`act.recovery`) restores a checkpoint and multiplies the LR by its `lr_factor` (0.5 by default): the
LR series then drops off the schedule's slope at the first step trained after the restore, which the LR
detector reads as "an LR override or scheduler change on resume?". The rollback's event in the store says who
changed it: that drop is the rollback's LR cut, said so, and no suspicious override (user trial, item 5)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from stethoscope.findings.catalogue import LR_SCHEDULE
from stethoscope.records import Finding

_AFTER = 5  # steps past the restored step (and the batches the rollback skipped) where its LR cut shows
_TOLERANCE = 1.5  # the drop matches the factor within this ratio (the schedule moves between the two records)


def rollback_lr_cuts(findings: list[Finding], actions: list[tuple[int | None, dict[str, Any]]]) -> list[Finding]:
    """The LR drops that are a rollback's own `lr_factor`, said as such (in place of the LR detector's guess)."""
    rollbacks = [d for _, d in actions if d.get("action") == "rollback" and _num(d.get("lr_factor"))
                 and isinstance(d.get("restored"), int)]
    if not rollbacks:
        return findings
    out = list(findings)
    for i, f in enumerate(out):
        rel = f.evidence.get("relative_change")
        if f.type != LR_SCHEDULE or f.step is None or not _num(rel) or rel >= 0 or f.evidence.get("rolled_back"):
            continue
        d = next((d for d in reversed(rollbacks) if _cut_by(f, float(rel), d)), None)
        if d is not None:
            out[i] = _said(f, d)
    return out


def _cut_by(f: Finding, rel: float, d: dict[str, Any]) -> bool:
    skip = d.get("skip")
    first = (skip[1] if isinstance(skip, list) and len(skip) == 2 and isinstance(skip[1], int) else d["restored"]) + 1
    if not d["restored"] < f.step <= first + _AFTER:  # type: ignore[operator]
        return False
    ratio, factor = 1.0 + rel, float(d["lr_factor"])
    return ratio > 0 and factor > 0 and abs(math.log(ratio / factor)) <= math.log(_TOLERANCE)


def _said(f: Finding, d: dict[str, Any]) -> Finding:
    n, factor = d.get("rollback"), float(d["lr_factor"])
    before, after = f.evidence.get("lr_before"), f.evidence.get("lr_after")
    values = f" ({before:.4g} -> {after:.4g})" if _num(before) and _num(after) else ""
    msg = (f"LR cut x{factor:g} at step {f.step}{values} by stethoscope's rollback {n}: automatic recovery restored "
           f"the checkpoint of step {d['restored']} and lowered the LR (Recovery lr_factor={factor:g}, now "
           f"x{d.get('lr_scale', factor):.3g} of the schedule); intended, not an override")
    ev = {**f.evidence, "rollback_lr_cut": n, "lr_factor": factor, "lr_scale": d.get("lr_scale")}
    return dataclasses.replace(f, severity="info", message=msg, evidence=ev,
                               causes=[f"stethoscope's automatic recovery (rollback {n}) multiplied the LR by "
                                       f"{factor:g} when it restored step {d['restored']}"],
                               fixes=["nothing: the rollback's own LR cut (set Recovery(lr_factor=None) to keep "
                                      "the schedule's LR on a rollback)"])


def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
