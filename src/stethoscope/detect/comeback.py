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
    """The share of the jump undone from its peak (what the detectors' rules weigh: under a quarter, the run is
    stuck). Not a measure of recovery to quote: a peak of 1e7 makes a loss still x264 its level "100%"."""
    return peak_undone(inc["level"], inc["peak"], inc["last"])


def peak_undone(level: float, peak: float, last: float) -> float:
    excess = peak - level
    if excess <= 0:
        return 1.0
    return max(0.0, min(1.0, (peak - last) / excess))


def how_far_back(level: float, peak: float, peak_step: int, last: float) -> tuple[str, dict[str, Any]]:
    """Where the loss stands at the last record of a jump it had not come back from, measured against its level
    before the jump (never as a share of the peak: it cannot read "recovered" beside "had not come back"), and
    the evidence for it: `recovered` ("not": under a quarter of the jump undone from its peak; "partly": more),
    `peak_undone` (that share) and `last_over_level` (the last loss / the level before the jump, when positive)."""
    frac = peak_undone(level, peak, last)
    ev: dict[str, Any] = {"recovered": "not" if frac < 0.25 else "partly", "peak_undone": frac}
    if level > 0 and math.isfinite(last):
        ev["last_over_level"] = last / level
        still = f"x{last / level:.3g} its level before the jump ({level:.4g})"
    else:
        still = f"{last - level:.4g} above its level before the jump ({level:.4g})"
    if frac < 0.25:
        return f"not recovered: still {still}", ev
    return f"down from its peak ({peak:.4g} at step {peak_step}) but still {still}", ev
