"""Evidence in proportion to the claim (user trial item 3): a divergence says the loss went up and stays up, which a
few records cannot show. The live detector names one at `error` as soon as a jump under a raised LR has not come
back a step or two later; a view of the run (live or finished) grades it by what the records show since:

* at least `SUSTAINED` records after the jump above its level by more than the noise (3 sigma of the records
  before it, and `_MIN_REL` of the level): sustained, `error` stands;
* fewer than `SUSTAINED` records after it at all (a live run, a run that stopped): `warning`, "not sustained yet";
* more records, too few of them up: `info`, a jump that came back.

A divergence that ended non-finite (the run blew up) keeps its severity: NaN is evidence enough; so does one a
rollback abandoned (the records after it are the restored path)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from stethoscope.findings.catalogue import DIVERGENCE
from stethoscope.records import Finding

SUSTAINED = 3  # records after the jump that must stay up before a divergence is an error
_NOISE_RECORDS = 32  # records before the jump whose step-to-step noise is the yardstick
_SIGMAS = 3.0
_MIN_REL = 0.05


def graded_divergences(findings: list[Finding], loss: tuple[np.ndarray, np.ndarray]) -> list[Finding]:
    """The findings with each error divergence graded by the records after its jump (see the module docstring)."""
    steps, values = loss
    out = []
    for f in findings:
        out.append(_graded(f, steps, values) if f.type == DIVERGENCE and f.severity == "error" else f)
    return out


def _graded(f: Finding, steps: np.ndarray, values: np.ndarray) -> Finding:
    level = f.evidence.get("level_before", f.evidence.get("base"))
    if f.step is None or not isinstance(level, (int, float)) or not math.isfinite(level) \
            or f.evidence.get("rolled_back") is not None or f.evidence.get("rollback") is not None:
        return f  # (a rollback abandoned its steps: the records after it are the restored path, not its own)
    before, after = values[steps < f.step], values[steps > f.step]
    if not np.all(np.isfinite(after)) or before.size < 4:
        return f  # it blew up (or there is nothing to measure noise on): the detector's word stands
    noise = _noise(before[-_NOISE_RECORDS:])
    line = level + max(_SIGMAS * noise, _MIN_REL * abs(level))
    up = int(np.count_nonzero(after > line))  # records after the jump above the line (a slow climb crosses late)
    if up >= SUSTAINED:
        return f
    came_back = after.size >= SUSTAINED  # the records went on, and too few of them stayed up
    ev = {**f.evidence, "records_up": up, "noise": noise, "sustained_records": SUSTAINED}
    if came_back:
        msg = (f"{f.message}; only {up} of the {after.size} records after it above {line:.4g} (its level plus the "
               "noise): a jump that came back, not a divergence")
        return dataclasses.replace(f, severity="info", message=msg, evidence={**ev, "recovered": "fully"})
    msg = (f"{f.message}; only {up} record{'s' if up != 1 else ''} after the jump so far (a divergence needs "
           f"{SUSTAINED} above its level plus the noise): not sustained yet")
    return dataclasses.replace(f, severity="warning", message=msg, evidence=ev)


def _noise(v: np.ndarray) -> float:
    v = v[np.isfinite(v)]
    d = np.diff(v)
    if d.size == 0:
        return 0.0
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / math.sqrt(2))
