"""A change of the loss's logging unit at a (re)start, taken for a divergence (`unit_changes`).

A training loop that prints the loss summed (or accumulated) over its log interval often prints its first record
after a start or resume for a single step: `step 47700 | loss 1.4684` (one step at the resume), then
`step 47710 | loss 13.8450` (ten steps summed) and so on, with the eval loss flat at 4.03-4.07 (wild-logs-7 F-B:
ERROR divergence "1.468 -> 13.85, not recovered"). The jump is a unit change when all of these hold:

- it is at the first record after the log's first record or after a resume (the first interval of a session);
- the level after it is the level before times the log interval (the steps between records), within `_TOL`, and the
  loss in its own units (divided by the interval) never rose past `_OWN_RISE` x the level before;
- the eval loss did not go up across it (evals after the jump within `_EVAL_RISE` x the eval before it, or, with
  none before, the evals after it flat).

Such a jump is info: a divergence needs the eval loss (or the loss in its own units) to go up too. Used by
`diagnose.engine`.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from stethoscope.findings.catalogue import DIVERGENCE, LOSS_SPIKE
from stethoscope.records import Finding

_TOL = 0.35  # the level ratio within this share of the log interval
_OWN_RISE = 1.5  # the loss in its own units never above this many times the level before the jump
_EVAL_RISE = 1.2  # the eval loss after the jump at most this many times the eval before it (or its first after it)
_AFTER = 5  # the records after the jump whose median is the level after it


def unit_changes(findings: list[Finding], loss: tuple[np.ndarray, np.ndarray], evals: tuple[np.ndarray, np.ndarray],
                 starts: list[int]) -> list[Finding]:
    """`findings` with each divergence or loss spike that is a logging-unit change at a (re)start graded info.
    `starts`: the steps after which a session began (resumes); the log's first record is always one."""
    steps, values = loss
    ok = np.isfinite(values)
    steps, values = steps[ok], values[ok]
    if steps.size < _AFTER + 2:
        return findings
    out = []
    for f in findings:
        at = f.evidence.get("spike_step", f.step)
        factor = _unit_factor(at, steps, values, evals, starts) if f.type in (DIVERGENCE, LOSS_SPIKE) \
            and f.severity != "info" and isinstance(at, int) else None
        if factor is None:
            out.append(f)
            continue
        g = replace(f, severity="info", evidence={**f.evidence, "non_problem": "logging_unit_change",
                                                  "unit_factor": factor})
        g.message += (f"; a change of the logging unit, not a divergence: the first record after the start is one "
                      f"step, the later ones sum the log interval of {factor} steps (the level x{factor}, the eval "
                      "loss did not go up)")
        out.append(g)
    return out


def _unit_factor(at: int, steps: np.ndarray, values: np.ndarray, evals: tuple[np.ndarray, np.ndarray],
                 starts: list[int]) -> int | None:
    i = int(np.searchsorted(steps, at))
    if i < 1 or i >= steps.size or steps[i] != at:
        return None
    if i > 1 and not any(steps[i - 2] <= s < steps[i - 1] for s in starts):
        return None  # not the first interval of a session (the log's first record, or the first after a resume)
    after_steps, after = steps[i:], values[i:]
    if after.size < _AFTER + 1:
        return None
    interval = int(np.median(np.diff(after_steps[: _AFTER + 1])))
    before = float(values[i - 1])
    if interval < 2 or before <= 0:
        return None
    ratio = float(np.median(after[:_AFTER])) / before
    if abs(ratio / interval - 1) > _TOL or float(np.max(after)) / interval > _OWN_RISE * before:
        return None
    return interval if _eval_flat(at, evals) else None


def _eval_flat(at: int, evals: tuple[np.ndarray, np.ndarray]) -> bool:
    es, ev = evals
    ok = np.isfinite(ev)
    es, ev = es[ok], ev[ok]
    later = ev[es >= at]
    if later.size < 2:
        return False  # no eval to tell a unit change from a divergence
    earlier = ev[es < at]
    ref = float(earlier[-1]) if earlier.size else float(later[0])
    return ref > 0 and float(np.max(later)) <= _EVAL_RISE * ref
