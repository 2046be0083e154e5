"""One slowdown in progress: where it began, what it has cost so far, and whether it is still growing.

A slowdown need not be a step. A leak, a growing queue or a cache that misses more each step makes each
step a little slower than the one before: a ramp. Read as a step, a ramp goes wrong three ways: dated
where it crossed the midpoint between the old and the new level, its onset comes late by half its climb;
priced by the median of its first records, its cost is a fraction of the truth; and once it is three times
its first slow level, every new record looks like a stall on top of it ("a stall every step"). So:

* the onset is the changepoint of a least-squares fit (`ramp_onset`): the old level before it, and from it
  a line (a jump, a slope, or both), or a ramp climbing from the old level itself when that explains the
  records as well (a ramp starts inside the noise: its first slow records do not stand out);
* the cost is the sum over blocks of `BLOCK` records of the block's median above the old level (`lost`):
  it follows a ramp, and a stall inside a block does not move it;
* the slow level quoted is the latest records' (`recent`), and a slowdown whose latest block is well
  above its first and above the block before is growing (`growth`).
Used by `detect.throughput`.
"""

from __future__ import annotations

import math
from typing import Any

BLOCK = 16  # records per block: the cost, the first and the latest slow level are block medians
KEPT = 64  # the latest records of a slowdown kept for its current level
_SPIKE, _NEAR = 3.0, 2  # a record this many times the median of its neighbours (this many on each side) is a stall
JUMP_RECORDS = 3  # stalls on top of a slowdown in a row that are a new, higher level (a stall lasts a record
# or two: an eval between two logged records shows in both)
_BIC_POSITIVE = 2.0  # a BIC difference that is 'positive evidence' (Kass & Raftery): less is a bare mention
_JUMP_SIGMAS = 3.0  # a step fit's jump this many sigmas of the old level's noise: the noise cannot explain it
_FASTER_RUN, _FASTER_Q = 3, 0.1  # records in a row under the old level's 10% quantile: a faster stretch
_MIN_REFIT = 6  # records an onset is fitted again over
GROWN = 1.5  # the latest block this many times the second: the slowdown has grown, not just wobbled (the first
# block may straddle the onset: half old level, half new)


def open_drop(start: int, level: float, values: list[float], last_step: int, steps: list[int] | None = None,
              **extra: Any) -> dict[str, Any]:
    """A slowdown found at `start` over the old `level`, with the slow records seen so far (at `steps`)."""
    d: dict[str, Any] = {"start": start, "level": level, "values": [], "last_step": start, "records": 0,
                         "lost": 0.0, "block": [], "blocks": 0, "first_slow": None, "peak": max(values), **extra}
    for i, v in enumerate(values):
        extend(d, v, steps[i] if steps else None)
    d["last_step"] = last_step
    return d


def extend(d: dict[str, Any], t: float, step: int | None = None) -> None:
    """One more record of the slowdown."""
    d["records"] = d.get("records", 0) + 1
    if step is not None:
        d["last_step"] = step
    d["values"] = (d["values"] + [t])[-KEPT:]
    d["excess"] = d.get("excess", 0.0) + t - d["level"]  # every second, stalls in it too: a passing one's price
    if "block" not in d:  # a slowdown saved before blocks were kept: priced from here on
        d["block"], d["lost"] = [], 0.0
    d["block"].append(t)
    if len(d["block"]) == BLOCK:
        m = median(d["block"])
        d["lost"] += (m - d["level"]) * BLOCK
        d["blocks"] = d.get("blocks", 0) + 1
        if d["blocks"] == 2:  # the reference of growth: the first block wholly inside the slowdown
            d["first_slow"], d["first_at"] = m, d["last_step"]
        d["block"] = []


def lost(d: dict[str, Any]) -> float:
    """The record time lost so far to the slowdown (block medians above the old level, never below 0)."""
    if "block" not in d:
        return max(median(d["values"]) - d["level"], 0.0) * d.get("records", len(d["values"]))
    part = (median(d["block"]) - d["level"]) * len(d["block"]) if d["block"] else 0.0
    return max(d["lost"] + part, 0.0)


def recent(d: dict[str, Any]) -> float:
    """The slowdown's current level: the median of its latest block (all it has when shorter)."""
    return median(d["values"][-BLOCK:])


def growth(d: dict[str, Any]) -> tuple[float, float] | None:
    """(early slow level, latest slow level) when the slowdown is still growing: its latest block at least
    `GROWN` times its second one (`first_slow`, at step `first_at`), and above the block before it. None for
    a slowdown that holds its level, and for one too short to tell (fewer than three blocks)."""
    first = d.get("first_slow")
    if first is None or d.get("records", 0) < 3 * BLOCK or len(d["values"]) < 2 * BLOCK:
        return None
    now, before = recent(d), median(d["values"][-2 * BLOCK: -BLOCK])
    if now >= GROWN * first and now > before and now > first:
        return first, now
    return None


def hold(d: dict[str, Any], stall: list[Any]) -> bool:
    """Keep a record that stands `_SPIKE`-fold above the slowdown until the next one says what it was; True
    once `JUMP_RECORDS` of them came in a row: the slowdown stepped up again."""
    d["over"] = d.get("over", []) + [stall]
    return len(d["over"]) >= JUMP_RECORDS


def release(d: dict[str, Any]) -> list[list[Any]]:
    """The records kept by `hold`, handed back (and forgotten)."""
    over, d["over"] = d.get("over", []), []
    return over


def ramp_onset(xs: list[float], ys: list[float]) -> int:
    """The index k where `ys` (at positions `xs`) leaves its old level (`_fit_onset`), the level it left being
    the one right before it. A window that reaches back over a faster stretch (a machine less busy for a while,
    an epoch of lighter batches) holds two old levels, and one changepoint fitted to it falls where the faster
    stretch began. A slowdown's first records are not faster than the level before it: when the records from
    the onset on open with `_FASTER_RUN` in a row under the old level's `_FASTER_Q` quantile (by chance 1 in
    1000 under that level's own noise), they are the level the slowdown left, and the onset is fitted again
    from there."""
    base = 0
    while len(xs) - base >= _MIN_REFIT:
        k = base + _fit_onset(xs[base:], ys[base:])
        if k - base < 2 or not _faster_from(ys[base:k], ys[k:]):
            return k
        base = k
    return base


def _faster_from(before: list[float], after: list[float]) -> bool:
    """Do the records `after` an onset open with `_FASTER_RUN` in a row (stalls on top skipped) under the
    `_FASTER_Q` quantile of the records `before` it, stalls left out: a faster stretch, not a slowdown."""
    level = median(before)
    calm = sorted(y for y in before if y <= _SPIKE * level)
    if len(calm) < 2:
        return False
    fast = calm[int(_FASTER_Q * (len(calm) - 1))]
    run = [y for y in after if y <= _SPIKE * level][:_FASTER_RUN]
    return len(run) == _FASTER_RUN and all(y < fast for y in run)


def _fit_onset(xs: list[float], ys: list[float]) -> int:
    """The index k where `ys` (at positions `xs`) leaves its old level. Two shapes are fitted by least
    squares, stalls on top left out (a record `_SPIKE` times the median of the `_NEAR` records on either side
    of it: an eval, a GC pause; a jump or a climb holds its neighbours):

    * a step: a level before k and a line c + b (x - x_k) from k on (a jump, a climb, or both), at least two
      points after k, ties to the earlier k;
    * a ramp from the old level: a level a before k and a + b (x - x_k) from k on (`_hinge`). A slowdown that
      adds a little to every step (a leak, a growing queue, a running mean of the step time) starts inside
      the noise; the step fit dates it where it first stands out, late by the records the noise hid.

    The ramp, the simpler shape (one parameter fewer), is the onset unless the step fits positively better
    (BIC by more than `_BIC_POSITIVE`) or its jump stands `_JUMP_SIGMAS` above the old level's own noise: a
    jump the noise cannot explain is a jump. Where the noise leaves both shapes open (a step whose new level's
    fast records sit at the old level), the ramp's onset can lead the step's by a few records."""
    pts = _calm(xs, ys)
    if len(pts) < 3:
        return 0
    s1, s2 = [0.0], [0.0]  # prefix sums for the level's residuals before k (its own mean: a noisy
    for _, y, _ in pts:   # series' median and mean differ, and a fit is judged against the mean)
        s1.append(s1[-1] + y)
        s2.append(s2[-1] + y * y)
    best, best_k = math.inf, 0
    for k in range(len(pts) - 1):
        pre = s2[k] - s1[k] * s1[k] / k if k else 0.0
        sse = pre + _line_sse(pts[k:])
        if sse < best * (1 - 1e-9):
            best, best_k = sse, k
    ramp, ramp_k = _hinge(pts)
    n = len(pts)
    if ramp_k is None or ramp_k == best_k or n < 6:
        return pts[best_k][2]
    bic_step = n * math.log(max(best, 1e-300) / n) + 4 * math.log(n)
    bic_ramp = n * math.log(max(ramp, 1e-300) / n) + 3 * math.log(n)
    if bic_step < bic_ramp - _BIC_POSITIVE or _jump_sigmas(pts, best_k, s1[best_k], s2[best_k]) >= _JUMP_SIGMAS:
        return pts[best_k][2]
    return pts[ramp_k][2]


def _calm(xs: list[float], ys: list[float]) -> list[tuple[float, float, int]]:
    """(x, y, index) of the records that are no stall on top of their neighbours (`_fit_onset`)."""
    # the first records are judged among the first 2 _NEAR + 1 (a stall opening the window has no left side);
    # the last among those up to them (the newest records are the new level, not a stall to drop)
    return [(x, y, i) for i, (x, y) in enumerate(zip(xs, ys))
            if y <= _SPIKE * median(ys[max(0, i - _NEAR): max(i + _NEAR, 2 * _NEAR) + 1])
            and not any(_SPIKE * v < y for v in ys[i + 1: i + 1 + _NEAR])]  # a new level holds; a stall falls back


def window_onset(xs: list[float], ys: list[float], k: int, window: int | None) -> int:
    """The step a slowdown began at, when each record is the mean of the last `window` steps' times (mmengine's
    `time`), given k, the record `ramp_onset` dated it at. A mean moves only as far as the slow steps fill its
    window: a jump at step s shows as a climb over the W records' steps after s, and a ramp from s as a curve
    whose straight part points back to s + (W - 1) / 2; fitted as a level change of the records themselves, the
    onset lands where the means first stand out, up to a window late. Here the change is fitted as what the
    log printed: each record the average, over the steps s..x of its window x - W + 1..x, of a level a, a jump
    c and a climb b (step s - 1 + j is b j slower), c, b >= 0 (least squares, stalls on top left out), for each
    s from a window and a record before the k-th record to it. xs[k] where the window is 1 or unknown, or
    fewer than 6 calm records."""
    w = int(window or 1)
    if w <= 1 or not 0 < k < len(xs):
        return int(xs[k])
    pts = _calm(xs, ys)
    hi = int(xs[k])
    if len(pts) < 6:  # three coefficients and the onset: too few records to fit them
        return hi
    best, best_s = math.inf, hi
    for s in range(int(xs[k - 1]) - w + 1, hi + 1):
        sse = _window_sse(pts, s, w)
        if sse < best * (1 - 1e-9):
            best, best_s = sse, s
    return best_s


def _window_sse(pts: list[tuple[float, float, int]], s: int, w: int) -> float:
    """The least residual sum of squares of y = a + c u + b r, c, b >= 0: u the share of a record's window
    at or after step s, r the mean over its window of max(0, step - s + 1), each divided by the window."""
    rows = []
    for x, y, _ in pts:
        lo = max(s, int(x) - w + 1)
        n = max(0, int(x) - lo + 1)
        rows.append((y, n / w, n * ((lo - s + 1) + (int(x) - s + 1)) / 2 / w))
    best = math.inf
    for use in ((1, 2), (1,), (2,)):  # both, the jump alone, the climb alone
        best = min(best, _lsq(rows, use))
    return best


def _lsq(rows: list[tuple[float, float, float]], use: tuple[int, ...]) -> float:
    """The residual sum of squares of y on a level and the columns `use` of `rows`, inf where a coefficient
    comes out negative (a faster change is no slowdown) or the columns are degenerate."""
    n = len(rows)
    my = sum(r[0] for r in rows) / n
    m = [sum(r[j] for r in rows) / n for j in use]
    cols = [[r[j] - mj for r in rows] for j, mj in zip(use, m)]
    yc = [r[0] - my for r in rows]
    g = [[sum(a * b for a, b in zip(ci, cj)) for cj in cols] for ci in cols]
    h = [sum(a * b for a, b in zip(ci, yc)) for ci in cols]
    if len(use) == 1:
        if g[0][0] <= 0:
            return math.inf
        coef = [h[0] / g[0][0]]
    else:
        det = g[0][0] * g[1][1] - g[0][1] * g[1][0]
        if det <= 1e-12 * max(g[0][0] * g[1][1], 1e-300):
            return math.inf
        coef = [(h[0] * g[1][1] - h[1] * g[0][1]) / det, (h[1] * g[0][0] - h[0] * g[1][0]) / det]
    if any(c < 0 for c in coef):
        return math.inf
    return max(sum(y * y for y in yc) - sum(c * hj for c, hj in zip(coef, h)), 0.0)


def _hinge(pts: list[tuple[float, float, int]]) -> tuple[float, int | None]:
    """(residual sum of squares, k) of the best least-squares fit of a level a before point k and the line
    a + b (x - x_k), b > 0, from k on: a climb that starts at the old level. (inf, None) when none climbs."""
    n = len(pts)
    my = sum(p[1] for p in pts) / n
    syy = sum((p[1] - my) ** 2 for p in pts)
    best, best_k = math.inf, None
    for k in range(1, n - 2):
        xk = pts[k][0]
        u = [max(0.0, p[0] - xk) for p in pts]
        mu = sum(u) / n
        suu = sum((a - mu) ** 2 for a in u)
        suy = sum((a - mu) * (p[1] - my) for a, p in zip(u, pts))
        if suu <= 0 or suy <= 0:
            continue
        sse = max(syy - suy * suy / suu, 0.0)
        if sse < best * (1 - 1e-9):
            best, best_k = sse, k
    return best, best_k


def _jump_sigmas(pts: list[tuple[float, float, int]], k: int, s1: float, s2: float) -> float:
    """How far the step fit's line starts above the level before point k, in that level's own noise (inf for
    a noiseless level, as a step time printed in whole milliseconds is)."""
    if k < 2:
        return math.inf
    level = s1 / k
    seg = pts[k:]
    m = len(seg)
    mx, my = sum(p[0] for p in seg) / m, sum(p[1] for p in seg) / m
    sxx = sum((p[0] - mx) ** 2 for p in seg)
    b = sum((p[0] - mx) * (p[1] - my) for p in seg) / sxx if sxx > 0 else 0.0
    jump = my + b * (seg[0][0] - mx) - level
    sigma = math.sqrt(max(s2 - s1 * s1 / k, 0.0) / (k - 1))
    if sigma <= 1e-9 * abs(level):
        return math.inf if jump > 0 else -math.inf
    return jump / sigma


def _line_sse(pts: list[tuple[float, float, int]]) -> float:
    """The residual sum of squares of the least-squares line through the points."""
    n = len(pts)
    mx = sum(p[0] for p in pts) / n
    my = sum(p[1] for p in pts) / n
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    sxy = sum((p[0] - mx) * (p[1] - my) for p in pts)
    syy = sum((p[1] - my) ** 2 for p in pts)
    return max(syy - (sxy * sxy / sxx if sxx > 0 else 0.0), 0.0)


def median(values: list[float]) -> float:
    s = sorted(values)
    return s[len(s) // 2] if s else math.nan


def streak_onset(slow: list[list[Any]], level: float) -> int:
    """Where a slowdown began: the first record of the streak at least halfway (geometrically) from the
    old level to the streak's median; a few barely-slow records before it were the usual jitter."""
    mid = math.sqrt(level * median([x[1] for x in slow]))
    return next((x[0] for x in slow if x[1] >= mid), slow[0][0])


def median_last(values: list[float]) -> float:
    """The median of a window's last values (`Window.last(n)`)."""
    vals = sorted(values)
    m = len(vals) // 2
    return vals[m] if len(vals) % 2 else 0.5 * (vals[m - 1] + vals[m])
