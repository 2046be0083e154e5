"""A loss spike that came back on one value but whose level never did: a divergence, judged at the run's end.

A per-step loss is noisy. After a jump it cannot get over (an LR set by hand to fifty times its value and held, in a
log that prints no LR: nanoGPT's console), the loss hovers above where it was, and one value of its noise dips back
within a spike's tolerance: the spike reads "recovered after 22 steps" (a tiny GPT: 2.48 -> 4.03, then ~2.65 to the
end, while the same run's W&B history, which logs the LR, is a divergence). Whether the run got its progress back is
a question about the level, which only the records after it answer.

So every loss spike at warning that recovered is watched (the last `_WATCHED`), and at the end of the records
(`never_back`, from `detect.spike`'s `finish`) the earliest one whose level never came back is a divergence dated at
the spike. Its level never came back when the median of the last fifth of the records since the spike (at least
`_MIN_TAIL`; the last `_KEPT` loss values are kept) stands above all of:
* where nine in ten of the `_BEFORE` records before the spike lay (their 90th percentile; the spike's level +
  `_SPREAD` sigma when they are no longer kept): an LR spike after which the loss trains on a few percent above
  its old level, inside its old spread, is no divergence;
* the tolerance a spike recovers within (`recover_rel` of the level);
* that median's own noise (3 sigma / sqrt(n) of the tail's spread).
A run that trains on below its old level after a spike (the usual: a bad batch, then the loss falls on) gets
nothing, and neither does a spike with too few records after it to show a level (`_MIN_TAIL` x `_TAIL_SHARE`).
"""

from __future__ import annotations

import math
from typing import Any

from stethoscope.findings.catalogue import DIVERGENCE, LOSS_SPIKE
from stethoscope.records import Finding

_WATCHED = 4  # recovered spikes watched at once (the oldest dropped)
_TAIL_SHARE = 5  # the level is the median of the last 1/_TAIL_SHARE of the records since the spike
_MIN_TAIL = 5  # ... of at least this many records
_KEPT = 256  # loss values kept (the longest tail judged)
_SIGMAS = 3.0
_SPREAD = 1.28  # sigmas of a normal noise under which nine in ten records lie (no records before the spike kept)
_BEFORE = 50  # records before the spike whose 90th percentile the level must stay above


def watch(w: dict[str, Any], found: list[Finding]) -> None:
    """Add the recovered warning loss spikes among one record's findings to the watch `w`."""
    for f in found:
        if f.type == LOSS_SPIKE and f.severity == "warning" and f.step is not None and \
                f.evidence.get("recovered") == "fully" and isinstance(f.evidence.get("level"), (int, float)):
            spikes = w.setdefault("spikes", [])
            spikes.append({"step": f.step, "level": float(f.evidence["level"]), "peak": f.evidence.get("peak"),
                           "back": f.evidence.get("recovered_step"), "causes": list(f.causes),
                           "sigma": float(f.evidence.get("sigma") or 0.0)})
            del spikes[:-_WATCHED]


def observe(w: dict[str, Any], step: int, v: float) -> None:
    """One finite loss value (every one: a spike's records count from its start), after the record's findings."""
    tail = w.setdefault("tail", [])
    tail.append((step, v))
    del tail[:-_KEPT]


def forget(w: dict[str, Any]) -> None:
    """A resume or schedule restart: the levels before it say nothing of the records after it."""
    w.clear()


def never_back(w: dict[str, Any], recover_rel: float, last_step: int | None, source: str) -> list[Finding]:
    """The divergence of the earliest watched spike whose level never came back, if any (see the module docstring)."""
    tail_all = w.get("tail", [])
    for sp in w.get("spikes", []):
        k = sum(1 for x, _ in tail_all if x >= sp["step"]) // _TAIL_SHARE  # of the records since the spike
        if k < _MIN_TAIL:
            continue
        tail = sorted(v for _, v in tail_all[-k:])
        mid = tail[k // 2]
        mad = sorted(abs(x - mid) for x in tail)[k // 2]
        noise = _SIGMAS * 1.4826 * mad / math.sqrt(k)
        level = sp["level"]
        before = sorted([v for x, v in tail_all if x < sp["step"]][-_BEFORE:])
        spread = before[int(0.9 * (len(before) - 1))] if len(before) >= _MIN_TAIL else level + _SPREAD * sp["sigma"]
        line = max(level + max(recover_rel * abs(level), noise), spread)
        if level <= 0 or mid <= line:
            continue
        return [_finding(sp, mid, k, line, last_step, source)]
    return []


def _finding(sp: dict[str, Any], mid: float, k: int, line: float, last_step: int | None, source: str) -> Finding:
    level = sp["level"]
    back = f" at step {sp['back']}" if sp.get("back") is not None else ""
    msg = (f"loss jumped at step {sp['step']} ({level:.4g} -> {sp['peak']:.4g}) and its level never came back: one "
           f"value dipped back within its noise{back}, but the median of the last {k} records (to step {last_step}) "
           f"is {mid:.4g}, x{mid / level:.3g} its level before the jump: the run lost the progress it had made")
    ev = {"level_before": level, "peak": sp["peak"], "spike_step": sp["step"], "tail_median": mid,
          "tail_records": k, "line": line, "dipped_back_step": sp.get("back"), "level_never_back": True,
          "recovered": "not", "last_over_level": mid / level}
    causes = sp["causes"] + ["the loss settled at a higher level after the jump: an LR raised and left there (by "
                             "hand, a resumed or replaced scheduler), or a change of data or loss at that step"]
    return Finding(DIVERGENCE, "error", sp["step"], msg, evidence=ev, causes=causes, source=source)
