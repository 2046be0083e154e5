"""Streaming statistics for detectors: bounded windows, robust level/noise, step-aware EMA, slopes.

Plain Python, no numpy: every structure here is O(1) per push and O(window) to summarise, and every
one has `state_dict()/load_state_dict()` with a bounded, JSON-serialisable state.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections import deque
from collections.abc import Iterable, Sequence
from itertools import islice
from typing import Any

MAD_TO_SIGMA = 1.4826  # MAD of a normal distribution times this is its standard deviation
_Z90 = 1.6449  # the 90th percentile of |N(0, 1)|


def is_finite(value: float | None) -> bool:
    """True for a real, finite number."""
    return value is not None and math.isfinite(value)


def median(values: Sequence[float]) -> float:
    """Median of a non-empty sequence."""
    s = sorted(values)
    n = len(s)
    mid = n // 2
    return s[mid] if n % 2 else 0.5 * (s[mid - 1] + s[mid])


def mad(values: Sequence[float], center: float | None = None) -> float:
    """Median absolute deviation around `center` (the median when None)."""
    c = median(values) if center is None else center
    return median([abs(v - c) for v in values])


def diff_sigma(values: Sequence[float], tails: bool = True) -> float:
    """Noise estimate that ignores trends and respects heavy tails: the spread of successive
    differences, divided by sqrt 2.

    A falling loss has a large MAD around its median but small step-to-step noise; differences
    measure the latter. The spread is the larger of 1.4826 x MAD and the 90th percentile of the
    absolute deviations / 1.645 - equal for Gaussian noise, but the second follows heavy-tailed noise
    (a memorising model's loss jumping x5 every few steps), so routine jumps are not called spikes.
    `tails=False` keeps the MAD alone (few values with a trend, such as evals). Returns 0.0 when
    fewer than two values are given.
    """
    n = len(values)
    if n < 2:
        return 0.0
    diffs = [b - a for a, b in zip(values, islice(values, 1, None))]
    return diff_spread(diffs, tails) / math.sqrt(2.0)


def diff_spread(diffs: Sequence[float], tails: bool = True) -> float:
    """The spread `diff_sigma` measures, of values already free of their trend: the larger of 1.4826 x MAD and
    the 90th percentile of the absolute deviations / 1.645 (the MAD alone with `tails=False`); 0.0 when empty."""
    if not diffs:
        return 0.0
    center = median(diffs)
    dev = sorted([abs(d - center) for d in diffs])
    m = len(dev)
    mid = dev[m // 2] if m % 2 else 0.5 * (dev[m // 2 - 1] + dev[m // 2])
    q90 = dev[min(m - 1, int(0.9 * (m - 1) + 0.5))]
    return max(MAD_TO_SIGMA * mid, q90 / _Z90) if tails else MAD_TO_SIGMA * mid


def theil_sen_slope(xs: Sequence[float], ys: Sequence[float], max_points: int = 40) -> float:
    """Robust slope: the median of pairwise slopes (Theil-Sen), on at most `max_points` points.

    Longer inputs are thinned evenly, so the cost stays O(max_points^2) whatever the window.
    Returns 0.0 when fewer than two distinct x values are given.
    """
    n = len(xs)
    if n > max_points:
        idx = [round(i * (n - 1) / (max_points - 1)) for i in range(max_points)]
        xs = [xs[i] for i in idx]
        ys = [ys[i] for i in idx]
        n = max_points
    slopes = [
        (ys[j] - ys[i]) / (xs[j] - xs[i])
        for i in range(n)
        for j in range(i + 1, n)
        if xs[j] != xs[i]
    ]
    return median(slopes) if slopes else 0.0


class Window:
    """The last `size` values, with O(1) mean/std from running sums and O(size) median/MAD."""

    __slots__ = ("size", "_values", "_sum", "_sumsq", "_pushes")

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"window size must be >= 1, got {size}")
        self.size = size
        self._values: deque[float] = deque(maxlen=size)
        self._sum = 0.0
        self._sumsq = 0.0
        self._pushes = 0

    def __len__(self) -> int:
        return len(self._values)

    def push(self, value: float) -> None:
        vals = self._values
        if len(vals) == self.size:
            old = vals[0]
            self._sum -= old
            self._sumsq -= old * old
        vals.append(value)
        self._sum += value
        self._sumsq += value * value
        self._pushes = pushes = self._pushes + 1
        if pushes % (4 * self.size) == 0:  # wipe float drift of the running sums now and then
            self._resum()

    def clear(self) -> None:
        self._values.clear()
        self._sum = self._sumsq = 0.0

    def values(self) -> list[float]:
        return list(self._values)

    def last(self, n: int) -> list[float]:
        """The newest `n` values, oldest first."""
        vals = self._values
        if n >= len(vals):
            return list(vals)
        return [vals[i] for i in range(-n, 0)]

    def mean(self) -> float:
        return self._sum / len(self._values) if self._values else math.nan

    def std(self) -> float:
        n = len(self._values)
        if n < 2:
            return 0.0
        m = self._sum / n
        return math.sqrt(max(self._sumsq / n - m * m, 0.0) * n / (n - 1))

    def median(self) -> float:
        return median(self._values) if self._values else math.nan

    def robust_sigma(self) -> float:
        """1.4826 x MAD: a standard deviation that a few outliers cannot inflate."""
        return MAD_TO_SIGMA * mad(self._values) if self._values else 0.0

    def diff_sigma(self, tails: bool = True) -> float:
        return diff_sigma(list(self._values), tails)

    def _resum(self) -> None:
        self._sum = math.fsum(self._values)
        self._sumsq = math.fsum(v * v for v in self._values)

    def state_dict(self) -> dict[str, Any]:
        return {"size": self.size, "values": list(self._values)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.size = int(state["size"])
        self._values = deque((float(v) for v in state["values"]), maxlen=self.size)
        self._resum()


class RollingMedian:
    """Median of the last `size` values, kept sorted incrementally: O(log size) per push, O(1) to read."""

    __slots__ = ("size", "_order", "_sorted")

    def __init__(self, size: int) -> None:
        self.size = size
        self._order: deque[float] = deque()
        self._sorted: list[float] = []

    def __len__(self) -> int:
        return len(self._order)

    def push(self, value: float) -> None:
        order, ranked = self._order, self._sorted
        if len(order) == self.size:
            del ranked[bisect_left(ranked, order.popleft())]
        order.append(value)
        insort(ranked, value)

    def median(self) -> float:
        s = self._sorted
        n = len(s)
        if n == 0:
            return math.nan
        mid = n // 2
        return s[mid] if n % 2 else 0.5 * (s[mid - 1] + s[mid])

    def clear(self) -> None:
        self._order.clear()
        self._sorted.clear()

    def state_dict(self) -> dict[str, Any]:
        return {"size": self.size, "values": list(self._order)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.size = int(state["size"])
        self._order = deque(float(v) for v in state["values"])
        self._sorted = sorted(self._order)


class StepEma:
    """Exponential moving average whose decay follows step numbers, not record counts.

    With `halflife` steps, a record 10 steps after the previous one decays the old average by
    0.5 ** (10 / halflife): sparse logs (every 50 steps) and dense logs (every step) agree.
    """

    __slots__ = ("halflife", "value", "step")

    def __init__(self, halflife: float) -> None:
        if halflife <= 0:
            raise ValueError(f"halflife must be > 0, got {halflife}")
        self.halflife = halflife
        self.value: float | None = None
        self.step: int | None = None

    def update(self, step: int, x: float) -> float:
        if self.value is None or self.step is None:
            self.value = x
        else:
            gap = max(step - self.step, 1)
            keep = 0.5 ** (gap / self.halflife)
            self.value = keep * self.value + (1.0 - keep) * x
        self.step = step
        return self.value

    def reset(self) -> None:
        self.value = None
        self.step = None

    def state_dict(self) -> dict[str, Any]:
        return {"halflife": self.halflife, "value": self.value, "step": self.step}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.halflife = float(state["halflife"])
        self.value = state["value"]
        self.step = state["step"]


class StepSeries:
    """The last `size` (step, value) pairs of one series, for look-backs by step number."""

    __slots__ = ("size", "_items")

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: deque[tuple[int, float]] = deque(maxlen=size)

    def __len__(self) -> int:
        return len(self._items)

    def push(self, step: int, value: float) -> None:
        self._items.append((step, value))

    def clear(self) -> None:
        self._items.clear()

    def items(self) -> list[tuple[int, float]]:
        return list(self._items)

    def last(self) -> tuple[int, float] | None:
        return self._items[-1] if self._items else None

    def since(self, step: int) -> list[tuple[int, float]]:
        """Pairs with step >= `step`, oldest first."""
        out: list[tuple[int, float]] = []
        for item in reversed(self._items):
            if item[0] < step:
                break
            out.append(item)
        out.reverse()
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"size": self.size, "items": [list(i) for i in self._items]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.size = int(state["size"])
        self._items = deque(((int(s), float(v)) for s, v in state["items"]), maxlen=self.size)


def lowest_of(m: float) -> float:
    """How far, in sigmas, the lowest of `m` independent normal draws sits below their mean (the expected
    extreme: sqrt(2 ln m) less its first-order correction); 0 for a handful of draws."""
    if m < 4:
        return 0.0
    root = math.sqrt(2 * math.log(m))
    return max(0.0, root - (math.log(math.log(m)) + math.log(4 * math.pi)) / (2 * root))


def shrunk_sigma(data_sigma: float, n: int, prior_sigma: float, prior_weight: float) -> float:
    """Blend a noise estimate from `n` values with a prior worth `prior_weight` values.

    With few values the prior dominates (a short excerpt cannot tell its own noise); with many the
    data does. Combines variances, so a noisier truth wins as evidence accumulates.
    """
    total = n + prior_weight
    if total <= 0:
        return prior_sigma
    return math.sqrt((n * data_sigma * data_sigma + prior_weight * prior_sigma * prior_sigma) / total)


def mean(values: Iterable[float]) -> float:
    """Arithmetic mean of a non-empty iterable."""
    vals = list(values)
    return math.fsum(vals) / len(vals)
