"""A level shift in a noisy series, judged on blocks of records rather than record by record.

A step time on a shared machine can jump between two levels from one record to the next (1.3 ms,
2.2 ms, 2.2 ms, 1.3 ms ...). A slowdown of +50% then leaves many records below any per-record
threshold, and a test that needs slow records in a row never fires. This test asks instead whether
the latest block of records, taken together, sits above what came before:

* its median is `min_rel` above the median of the reference records before it (up to `REFERENCE`, at
  least `MIN_REFERENCE`: a short log is tested against what it has), and above every
  median of as many consecutive records in the history (the run's own slow phases), and
* a rank test (Mann-Whitney) says the block is higher than the reference with a z-score that
  survives testing the whole run again and again (`z_needed`, a Bonferroni bound).

The onset is the changepoint of a step-plus-ramp least-squares fit (`detect.slowdown.ramp_onset`): a
shift may be a jump or a climb, and a climb is dated where it left the old level, not where it crossed
the midpoint to the new one.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

from stethoscope.detect.slowdown import ramp_onset

BLOCK = 16  # records in the block tested
REFERENCE = 64  # records before the block that are its reference...
MIN_REFERENCE = BLOCK  # ...or as many as a short log has (60 records of a run logged every 20 steps), down to this
_STRIDE = BLOCK // 4  # history windows overlap by three quarters: no burst worth the name slips between


@dataclass(slots=True)
class Shift:
    onset: int  # index into the series given to `find_shift`
    level: float  # median of the reference records
    slow_level: float  # median of the records from the onset
    usual_max: float  # the highest median of BLOCK consecutive records in the history before
    spread: float  # the history's 90th percentile over its median, minus 1
    z: float  # the rank test's z-score


def z_needed(records: int, alpha: float = 0.01) -> float:
    """The one-sided z a block must reach so that a run of `records` records, tested once per
    `_STRIDE` records, shows a false shift with probability below `alpha`."""
    tests = max(1, records // _STRIDE)
    return NormalDist().inv_cdf(1 - alpha / tests)


def find_shift(values: Sequence[float], min_rel: float, z_min: float,
               steps: Sequence[float] | None = None) -> Shift | None:
    """Is there an upward level shift ending the series? `values` is the history, latest last; `steps` their
    steps (a log may print more often while slow: a climb is a line in steps, not in records)."""
    n = len(values)
    if n < BLOCK + MIN_REFERENCE:
        return None
    block = list(values[-BLOCK:])
    ref = list(values[max(0, n - BLOCK - REFERENCE): -BLOCK])
    history = values[:-BLOCK]
    level, slow = _median(ref), _median(block)
    if not level > 0 or slow <= level * (1 + min_rel):
        return None
    usual = max(_median(history[i: i + BLOCK]) for i in range(0, len(history) - BLOCK + 1, _STRIDE))
    if slow <= usual * (1 + min_rel):
        return None
    z = _mann_whitney_z(block, ref)
    if z < z_min:
        return None
    tail = list(values[-BLOCK - REFERENCE // 2:])
    xs = [float(x) for x in (steps if steps is not None else range(n))[n - len(tail):]]
    onset = n - len(tail) + ramp_onset(xs, tail)
    hist_sorted = sorted(history)
    mid = _median(history)
    spread = hist_sorted[min(len(hist_sorted) - 1, int(0.9 * len(hist_sorted)))] / mid - 1 if mid > 0 else 0.0
    return Shift(onset, level, _median(list(values[onset:])), usual, spread, z)


def may_shift(history: list[float], value: float, min_rel: float) -> bool:
    """Would `find_shift(history + [value], min_rel, ...)` get past its first test (enough values, the block's
    median `min_rel` above its reference's)? The same values and expressions, without copying the history."""
    n = len(history) + 1
    if n < BLOCK + MIN_REFERENCE:
        return False
    level = _median(history[max(0, n - BLOCK - REFERENCE): n - BLOCK])
    slow = _median(history[n - BLOCK:] + [value])
    return not (not level > 0 or slow <= level * (1 + min_rel))


def _mann_whitney_z(high: list[float], low: list[float]) -> float:
    """z-score of "`high` is stochastically larger than `low`" (normal approximation, ties halved)."""
    m, k = len(high), len(low)
    low_sorted = sorted(low)
    u = 0.0
    for v in high:
        below = _count_below(low_sorted, v)
        equal = _count_below(low_sorted, v, strict=False) - below
        u += below + 0.5 * equal
    mean = m * k / 2
    sd = math.sqrt(m * k * (m + k + 1) / 12)
    return (u - mean) / sd if sd > 0 else 0.0


def _count_below(sorted_values: list[float], v: float, strict: bool = True) -> int:
    return bisect.bisect_left(sorted_values, v) if strict else bisect.bisect_right(sorted_values, v)


def _median(values: Sequence[float]) -> float:
    s = sorted(values)
    k = len(s)
    if k == 0:
        return math.nan
    return s[k // 2] if k % 2 else 0.5 * (s[k // 2 - 1] + s[k // 2])
