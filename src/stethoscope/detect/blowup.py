"""A loss that turns NaN/Inf with no jump before it, right after the LR was pushed up off its schedule,
is a divergence: the finite climb was too fast for the log to show (a log written every 10-25 steps goes
from a normal row straight to NaN). The NaN is its symptom. A NaN with no such jump before it (a bad
batch) stays a `nan` finding alone."""

from __future__ import annotations

import math

from stethoscope.detect.lr import LrTracker
from stethoscope.findings.catalogue import DIVERGENCE
from stethoscope.records import Finding

LR_FACTOR = 2.0  # an LR pushed up at least this much, then a NaN/Inf loss: a blow-up


def lr_blowup(lr: LrTracker, step: int, value: float, reported_jump: float | None, within: int,
              level: float | None, source: str) -> Finding | None:
    """The divergence finding for a non-finite loss `value` at `step`, when the latest off-schedule LR jump
    (x LR_FACTOR or more) came within `within` steps before it and was not reported yet; else None."""
    jump = lr.last_jump
    cause = lr.jump_cause(step, within)
    if cause is None or jump is None or jump[0] == reported_jump or jump[1] <= 0 or jump[2] / jump[1] < LR_FACTOR:
        return None
    shown = "NaN" if math.isnan(value) else "Inf"
    lag = step - int(jump[0])
    when = f"{lag} step{'s' if lag > 1 else ''} after" if lag else "as"
    msg = (f"the loss turned {shown} at step {step}, {when} the LR jumped {jump[1]:.4g} -> {jump[2]:.4g} "
           f"(x{jump[2] / jump[1]:.3g}) at step {int(jump[0])}: the run blew up")
    ev = {"lr_before": jump[1], "lr_after": jump[2], "lr_jump_step": int(jump[0]), "value": shown,
          "level_before": level, "blew_up": True, "recovered": "not"}
    return Finding(DIVERGENCE, "error", step, msg, evidence=ev, causes=[cause], source=source)
