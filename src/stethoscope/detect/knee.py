"""A plateau after a healthy descent: the loss was falling and stopped, at once, for good (the model
stopped learning mid-run: an LR gone to 0 that the log does not show, a frozen or detached part, a data
loader repeating one batch). Used by `detect.trend`.

Convergence slows down gradually: window after window (a tenth of the descent so far each), the loss
falls by a steady fraction of what it fell in the window before. A stop is a knee: the loss fell
steadily, by many noise sigmas, through three windows, then by under `_AFTER_SHARE` of what that
deceleration predicts over the next two, and stayed flat from there to now, for at least
`plateau_min_records` records. A fall that was a recovery from a spike is no descent (the windows
before it rose first); a knee where the logged LR is under a tenth of its peak is the end of the
schedule (annealing), not a stop. The finding is `info`: a small model converging onto the floor its
data allows makes the same knee (the synthetic benchmark's healthy runs did), and the curve alone
cannot tell the two apart.
"""

from __future__ import annotations

import math
from bisect import insort
from typing import Any

from stethoscope.findings.catalogue import PLATEAU
from stethoscope.records import Finding

CHECK_EVERY = 8  # records between two knee tests (each O(points kept)); `due` spaces them out as points grow
_KEPT = 512  # points kept; every other one is dropped when full (the window is a share of the run)
_MIN_POINTS = 24
_MIN_WINDOW = 4  # points in a window
_BEFORE_SIGMAS = 5.0  # the fall between the two windows before the knee, in sigmas of their difference
_MIN_FALL_REL = 0.01  # ...and as a share of the level: a real descent, not a wiggle
_MIN_FALL_OF_DESCENT = 0.02  # ...and of the whole descent so far: still falling fast when it stopped
_AFTER_SHARE = 0.25  # the fall after the knee, as a share of what the curve's own deceleration predicts
_SCHEDULE_END = 0.1  # a knee with the LR below this share of its peak is the schedule's end
STOPPED = "(the model stopped learning mid-run)"
_LEARNED = 0.25  # a stop below this share of the first loss may be a floor reached (a fine-tune): info


class KneeTracker:
    """The loss curve (one point a record, a spike clipped to the level + 4 sigmas), thinned to at most
    `_KEPT` points, and the test for a stop after a descent."""

    def __init__(self) -> None:
        self.points: list[list[float]] = []  # [step, level, lr or nan]
        self.stride = 1  # records-per-point multiplier after thinning
        self._skip = 0
        self._index_of: list[list[float]] | None = None  # the `points` list the index below describes

    def _index(self) -> tuple[list[float], list[float] | None, list[int]]:
        """The running sums of the levels, their steps' sizes sorted (None once one is NaN: unordered) and the
        window places j that `_test` may pass (`_steady`, then `_never` once the windows after j are in), for
        the points kept: extended as points arrive, rebuilt when they are thinned (a new list). The same floats
        as the test computes from the points each time: only the work already done is kept."""
        pts = self.points
        if self._index_of is not pts:
            self._index_of, self._cum, self._diffs, self._steady, self._waiting = pts, [0.0], [], [], []
        cum, diffs, steady, waiting = self._cum, self._diffs, self._steady, self._waiting
        for i in range(len(cum) - 1, len(pts)):
            cum.append(cum[-1] + pts[i][1])
            if i and diffs is not None:
                d = abs(pts[i][1] - pts[i - 1][1])
                if d != d:
                    self._diffs = diffs = None
                else:
                    insort(diffs, d)
            if _steady(pts, cum, i):
                waiting.append(i)
            while waiting and waiting[0] + 2 * max(_MIN_WINDOW, round(waiting[0] / 10)) <= i + 1:
                j = waiting.pop(0)
                if not _never(cum, j):
                    steady.append(j)
        return cum, diffs, steady

    def due(self, records: int) -> bool:
        """Is a knee test due at this record count: every `CHECK_EVERY` records, and every quarter of the points
        kept once there are many (the test is O(points): O(4) a record, amortised)."""
        return records % max(CHECK_EVERY, len(self.points) // 4) == 0

    def push(self, step: int, level: float, lr: float | None) -> None:
        self._skip += 1
        if self._skip < self.stride:
            return
        self._skip = 0
        self.points.append([step, level, math.nan if lr is None else lr])
        if len(self.points) >= _KEPT:
            self.points = self.points[::2]
            self.stride *= 2

    def knee(self, min_records: int, min_steps: int, peak_lr: float) -> dict[str, Any] | None:
        """The stop, when the curve now ends in one: {step, level, before_step, before, first, fall, span} or
        None."""
        pts = self.points
        n = len(pts)
        if n < _MIN_POINTS:
            return None
        cum, diffs, steady = self._index()
        if diffs is None:
            diffs = sorted(abs(b[1] - a[1]) for a, b in zip(pts, pts[1:]))
        sigma = diffs[len(diffs) // 2] / (0.6745 * math.sqrt(2.0))  # one loss's noise, free of the trend
        if sigma <= 0:
            return None
        for j in steady if sigma == sigma else range(3, n):  # the knee between window 2 (before) and window 3 (after), earliest first
            if n - j < 3 * max(_MIN_WINDOW, round(j / 10)):
                break  # ...and every later j: its windows after reach past now
            k = _test(pts, cum, j, sigma, n)
            if k is None:
                continue
            span_records = (n - j) * self.stride
            if span_records < min_records / 2 or pts[-1][0] - pts[j][0] < min_steps / 2:
                return None  # the earliest knee is too recent: not for good yet
            at = _onset(pts, j, k.pop("w"))
            k["step"] = int(pts[at][0])
            lr = pts[at][2]
            if math.isfinite(lr) and peak_lr > 0 and lr < _SCHEDULE_END * peak_lr:
                return None
            return k
        return None

    def state_dict(self) -> dict[str, Any]:
        return {"points": [list(p) for p in self.points], "stride": self.stride, "skip": self._skip}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.points = [list(p) for p in state.get("points", [])]
        self.stride = state.get("stride", 1)
        self._skip = state.get("skip", 0)


def _steady(pts: list[list[float]], cum: list[float], j: int) -> bool:
    """Does window place j pass the parts of `_test` that do not depend on the noise or on the points after j
    (a steady descent before it, not yet a tail)? The same expressions: a j failing here fails there."""
    w = max(_MIN_WINDOW, round(j / 10))
    if j < 4 * w:
        return False
    m_, m0, m1, m2 = ((cum[a + w] - cum[a]) / w for a in (j - 4 * w, j - 3 * w, j - 2 * w, j - w))
    f12, f01 = m1 - m2, m0 - m1
    if f12 < _MIN_FALL_REL * abs(m2) or f01 < 0.5 * f12:
        return False
    return not f12 < _MIN_FALL_OF_DESCENT * (pts[0][1] - m2)


def _never(cum: list[float], j: int) -> bool:
    """Can window place j pass `_test` at no noise level? Its first bar wants sd <= fall / `_BEFORE_SIGMAS`, its
    bar after the knee sd >= (fall after - `_AFTER_SHARE` x predicted): a curve still falling fast after j (most
    places of a descent) passes neither at once. The same expressions as `_test`; called never only with a
    margin a million times any rounding of the comparison (and not for a non-finite or zero fall)."""
    w = max(_MIN_WINDOW, round(j / 10))
    m0, m1, m2, m3, m4 = ((cum[a + w] - cum[a]) / w for a in (j - 3 * w, j - 2 * w, j - w, j, j + w))
    f12, f01 = m1 - m2, m0 - m1
    if not (f12 > 0 and f01 > 0 and math.isfinite(m0 + m1 + m2 + m3 + m4)):
        return False
    r = min(1.0, f12 / f01)
    predicted = f12 * (r + r * r)
    after, share = m2 - m4, _AFTER_SHARE * predicted
    return after - share - f12 / _BEFORE_SIGMAS > 1e-9 * (abs(after) + abs(share) + f12) + 1e-300


def _test(pts: list[list[float]], cum: list[float], j: int, sigma: float, n: int) -> dict[str, Any] | None:
    """Windows of w points (a tenth of the descent so far) W_ W0 W1 W2 | W3 W4 around point j, and the flat
    rest to now: a knee when the curve fell steadily through W_-W2 (beyond noise, not a spike's recovery)
    and then fell by under `_AFTER_SHARE` of what its own deceleration predicts, and stayed flat."""
    w = max(_MIN_WINDOW, round(j / 10))
    if j < 4 * w or n - j < 3 * w:
        return None
    sd = sigma * math.sqrt(2.0 / w)  # the difference of two window means
    m1, m2 = (cum[j - w] - cum[j - 2 * w]) / w, (cum[j] - cum[j - w]) / w
    f12 = m1 - m2
    if f12 < _BEFORE_SIGMAS * sd:  # most points fail here: the rest is computed only past it
        return None
    m_, m0, m3, m4 = ((cum[a + w] - cum[a]) / w for a in (j - 4 * w, j - 3 * w, j, j + w))
    f01 = m0 - m1
    if f12 < _MIN_FALL_REL * abs(m2) or f01 < 0.5 * f12 or m_ < m0 - sd:
        return None  # no steady descent right before (a wiggle, or the recovery from a spike or a bad stretch)
    if f12 < _MIN_FALL_OF_DESCENT * (pts[0][1] - m2):
        return None  # a tail: the loss had already come most of its way (convergence slows down like this)
    r = min(1.0, f12 / f01)  # the curve's own deceleration per window
    predicted = f12 * (r + r * r)  # what it would have fallen over the next two windows, slowing as it was
    if m2 - m4 > _AFTER_SHARE * predicted + sd:
        return None
    last = (cum[n] - cum[n - w]) / w
    lowest = min((cum[a + w] - cum[a]) / w for a in range(j, n - w + 1, w))
    if abs(m3 - last) > _AFTER_SHARE * predicted + 2 * sd or m3 - lowest > _AFTER_SHARE * predicted + 2 * sd:
        return None  # it did not stay flat to now
    return {"step": int(pts[j][0]), "level": m3, "before_step": int(pts[j - 2 * w][0]), "before": m1,
            "first": pts[0][1], "fall": m1 - m3, "span": int(pts[-1][0] - pts[j][0]), "w": w}


def _onset(pts: list[list[float]], j: int, w: int) -> int:
    """Where in [j - w, j + w] the curve turned: the point k whose 2w points before fit a line and 2w points
    after a constant with the least squared error (a window test only places the knee within a window)."""
    best, at = math.inf, j
    for k in range(max(2, j - w), min(len(pts) - 1, j + w + 1)):
        lo, hi = max(0, k - 2 * w), min(len(pts), k + 2 * w)
        err = _line_sse([p[1] for p in pts[lo:k]]) + _const_sse([p[1] for p in pts[k:hi]])
        if err < best:
            best, at = err, k
    return at


def _line_sse(ys: list[float]) -> float:
    n = len(ys)
    mx, my = (n - 1) / 2, sum(ys) / n
    sxx = sum((i - mx) ** 2 for i in range(n))
    sxy = sum((i - mx) * (y - my) for i, y in enumerate(ys))
    slope = sxy / sxx if sxx else 0.0
    return sum((y - my - slope * (i - mx)) ** 2 for i, y in enumerate(ys))


def _const_sse(ys: list[float]) -> float:
    m = sum(ys) / len(ys)
    return sum((y - m) ** 2 for y in ys)


def knee_finding(k: dict[str, Any], last_step: int, source: str) -> Finding:
    msg = (f"the loss stopped improving at step {k['step']} after a healthy descent: it fell "
           f"{k['before']:.4g} -> {k['level']:.4g} in the {k['step'] - k['before_step']} steps before, then stayed "
           f"flat at {k['level']:.4g} for {last_step - k['step']} steps {STOPPED}")
    ev = {"start_level": k["first"], "level": k["level"], "fall_before": k["fall"], "steps": last_step - k["step"],
          "after_descent": True}
    if k["first"] > 0 and k["level"] < _LEARNED * k["first"]:  # most of the learning done: likely a floor reached
        msg = msg.replace(STOPPED, f"(at under {_LEARNED:.0%} of where it started: likely a floor reached, "
                                   "converged rather than stopped)")
    else:
        msg += "; if the run should go lower, check that the LR is not 0 and that the weights and the data change"
    # info: a small model on a small dataset converges onto its floor through the same knee (the synthetic
    # benchmark's healthy runs did, held-out): the curve alone cannot tell a stop from a floor reached
    return Finding(PLATEAU, "info", k["step"], msg, evidence=ev, source=source)
