"""How a loss jump ended: how much of it the run undid, and whether a divergence reported while the loss
stayed up is taken back because the loss came back (then it was a slow loss spike). Shared by
`detect.spike` (jumps) and `detect.trend` (sustained rises)."""

from __future__ import annotations

import math
from typing import Any

from stethoscope.detect.config import DetectConfig
from stethoscope.records import Finding


END_SHARE = 0.25  # a rise that lasted this share of the log to its end, before `divergence_min_steps` passed


def up_to_the_end(records: int, since: int, first_step: int, last_step: int, cfg: DetectConfig) -> bool:
    """Did the log end inside a sustained rise that had no time to become a divergence (a short run: the
    loss level stayed well above its best on `divergence_min_records` records and for the last `END_SHARE`
    of the log)? A run that ends that way did not come back: a divergence, dated where the rise began."""
    return records >= cfg.divergence_min_records and last_step - since >= END_SHARE * (last_step - first_step)


def came_back(before: float, now: float | None, cfg: DetectConfig, rel: float | None = None) -> bool:
    """Is the loss level at the end back within `divergence_rise_rel` (or `rel`, the bar the rise was held to:
    `detect.trend_rise`) of its level before an incident? Then the incident was a jump the run took long to
    undo (a spike, at warning), not a divergence."""
    rel = cfg.divergence_rise_rel if rel is None else rel
    return now is not None and math.isfinite(now) and before > 0 and now <= before * (1 + rel)


def withdrawn_divergence(d: Finding, why: str) -> Finding:
    """A divergence reported while the loss stayed up, taken back at the end: an info the pipeline drops
    (the incident book releases what it claimed)."""
    d.severity = "info"
    d.message += f"; withdrawn: {why}"
    d.evidence["withdrawn"] = True
    return d


def recovered_fraction(inc: dict[str, Any]) -> float:
    excess = inc["peak"] - inc["level"]
    if excess <= 0:
        return 1.0
    return max(0.0, min(1.0, (inc["peak"] - inc["last"]) / excess))
