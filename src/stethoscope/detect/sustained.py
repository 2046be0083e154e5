"""Evidence in proportion to the claim (user trial item 3): a divergence says the loss went up and stays up, which a
few records cannot show. A detector names one at `error` as soon as a jump under a raised LR has not come back a
step or two later; the run's records since grade it, with one rule for the live run and every view of it (`graded`:
the views grade each divergence of the replay, `SustainedGate` each one the live detectors emit):

* at least `SUSTAINED` records after the jump above its level by more than the noise (3 sigma of the records
  before it, and `_MIN_REL` of the level): sustained, `error` stands;
* fewer than `SUSTAINED` records after it at all (a live run, a run that stopped): `warning`, "not sustained yet"
  (live: raised to its `error` once the records show it sustained, or `info` once they show it came back);
* more records, too few of them up: `info`, a jump that came back.

A divergence that ended non-finite (the run blew up) keeps its severity: NaN is evidence enough; so does one a
rollback abandoned (the records after it are the restored path)."""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import deque
from collections.abc import Sequence
from typing import Any

from stethoscope.findings.catalogue import DIVERGENCE
from stethoscope.records import LOSS, Finding, StepRecord

SUSTAINED = 3  # records after the jump that must stay up before a divergence is an error
_NOISE_RECORDS = 32  # records before the jump whose step-to-step noise is the yardstick
_SIGMAS = 3.0
_MIN_REL = 0.05


def graded_divergences(findings: list[Finding], loss: tuple[Sequence[int], Sequence[float]]) -> list[Finding]:
    """The findings with each error divergence graded by the records after its jump (see the module docstring);
    `loss` is the run's loss series (steps, values), lists or arrays."""
    if not any(f.type == DIVERGENCE and f.severity == "error" for f in findings):
        return list(findings)
    steps, values = (_listed(a) for a in loss)
    out = []
    for f in findings:
        out.append(graded(f, steps, values))
    return out


def _listed(a: Any) -> list:
    return a.tolist() if hasattr(a, "tolist") else list(a)  # an array's items as Python numbers, at C speed


def graded(f: Finding, steps: Sequence[int], values: Sequence[float]) -> Finding:
    """A divergence at error graded by the loss records (`steps`, `values`) around its jump; other findings as
    they are."""
    if f.type != DIVERGENCE or f.severity != "error":
        return f
    level = f.evidence.get("level_before", f.evidence.get("base"))
    if f.step is None or not isinstance(level, (int, float)) or not math.isfinite(level) \
            or f.evidence.get("rolled_back") is not None or f.evidence.get("rollback") is not None:
        return f  # (a rollback abandoned its steps: the records after it are the restored path, not its own)
    before = [v for s, v in zip(steps, values) if s < f.step]
    after = [v for s, v in zip(steps, values) if s > f.step]
    if not all(math.isfinite(v) for v in after) or len(before) < 4:
        return f  # it blew up (or there is nothing to measure noise on): the detector's word stands
    noise = _noise(before[-_NOISE_RECORDS:])
    line = level + max(_SIGMAS * noise, _MIN_REL * abs(level))
    up = sum(1 for v in after if v > line)  # records after the jump above the line (a slow climb crosses late)
    if up >= SUSTAINED:
        return f
    came_back = len(after) >= SUSTAINED  # the records went on, and too few of them stayed up
    ev = {**f.evidence, "records_up": up, "noise": noise, "sustained_records": SUSTAINED}
    if came_back:
        msg = (f"{f.message}; only {up} of the {len(after)} records after it above {line:.4g} (its level plus the "
               "noise): a jump that came back, not a divergence")
        return dataclasses.replace(f, severity="info", message=msg, evidence={**ev, "recovered": "fully"})
    msg = (f"{f.message}; only {up} record{'s' if up != 1 else ''} after the jump so far (a divergence needs "
           f"{SUSTAINED} above its level plus the noise): not sustained yet")
    return dataclasses.replace(f, severity="warning", message=msg, evidence=ev)


def _noise(v: Sequence[float]) -> float:
    v = [x for x in v if math.isfinite(x)]
    d = [b - a for a, b in zip(v, v[1:])]
    if not d:
        return 0.0
    mid = statistics.median(d)
    return float(1.4826 * statistics.median([abs(x - mid) for x in d]) / math.sqrt(2))


_KEPT = 512  # loss records the live gate keeps: a divergence dated further back keeps the detector's word


class SustainedGate:
    """The live side of `graded`: each divergence the detectors emit at `error` is graded by the loss records so
    far; one held at `warning` (not sustained yet) is emitted again, at its `error`, once `SUSTAINED` records after
    the jump stay up, or at `info` once the records show it came back. A later word of the detector on the same
    divergence (its end, its withdrawal) releases it. The views grade the whole run the same way, so the live
    record and every view agree."""

    def __init__(self) -> None:
        self._steps: deque[int] = deque(maxlen=_KEPT)
        self._values: deque[float] = deque(maxlen=_KEPT)
        self._held: list[Finding] = []

    def update(self, record: StepRecord | None, found: list[Finding]) -> list[Finding]:
        v = record.values.get(LOSS) if record is not None else None
        if v is not None:
            while self._steps and self._steps[-1] >= record.step:  # training went back (a rollback): that path's
                self._steps.pop()  # records are superseded, as in the store the views read
                self._values.pop()
            self._steps.append(record.step)
            self._values.append(float(v))
        if not found and not self._held:
            return found
        steps, values = list(self._steps), list(self._values)
        out = []
        for f in found:
            self._held = [h for h in self._held if (h.source, h.step) != (f.source, f.step)] \
                if f.type == DIVERGENCE else self._held
            g = graded(f, steps, values) if self._dated(f) else f
            if g is not f and g.severity == "warning":
                self._held.append(f)
            out.append(g)
        for f in list(self._held):
            g = graded(f, steps, values)
            if g.severity != "warning":
                self._held.remove(f)
                out.append(dataclasses.replace(g))  # its error (the records show it sustained), or its info
        return out

    def _dated(self, f: Finding) -> bool:
        """Do the records kept reach back before the jump (else the detector's word stands)?"""
        return bool(self._steps) and f.step is not None and self._steps[0] < f.step

    def state_dict(self) -> dict[str, Any]:
        return {"steps": list(self._steps), "values": list(self._values)}

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        self._steps = deque((state or {}).get("steps", ()), maxlen=_KEPT)
        self._values = deque((state or {}).get("values", ()), maxlen=_KEPT)
        self._held = []  # a divergence held on the path left behind (a rollback, a resume) is that path's
