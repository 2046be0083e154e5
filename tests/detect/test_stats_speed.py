"""The streaming statistics every detector pushes each record through, written for speed, give the same doubles
as they did: the old code is kept here and compared value by value on random series (odd values included)."""

from __future__ import annotations

import math
import random
from collections import deque

import pytest

from stethoscope.detect import overfit_quality as pattern
from stethoscope.detect.overfit_quality import HeldOutQuality
from stethoscope.detect.stats import MAD_TO_SIGMA, RollingMedian, Window, diff_sigma, median


def _ref_diff_sigma(values, tails=True):
    n = len(values)
    if n < 2:
        return 0.0
    diffs = [values[i] - values[i - 1] for i in range(1, n)]
    center = median(diffs)
    dev = sorted(abs(d - center) for d in diffs)
    m = len(dev)
    mid = dev[m // 2] if m % 2 else 0.5 * (dev[m // 2 - 1] + dev[m // 2])
    q90 = dev[min(m - 1, int(0.9 * (m - 1) + 0.5))]
    spread = max(MAD_TO_SIGMA * mid, q90 / 1.6449) if tails else MAD_TO_SIGMA * mid
    return spread / math.sqrt(2.0)


class _RefWindow:
    def __init__(self, size):
        self.size, self.values, self.sum, self.sumsq, self.pushes = size, deque(maxlen=size), 0.0, 0.0, 0

    def push(self, value):
        if len(self.values) == self.size:
            old = self.values[0]
            self.sum -= old
            self.sumsq -= old * old
        self.values.append(value)
        self.sum += value
        self.sumsq += value * value
        self.pushes += 1
        if self.pushes % (4 * self.size) == 0:
            self.sum = math.fsum(self.values)
            self.sumsq = math.fsum(v * v for v in self.values)


def _values(rng: random.Random, n: int) -> list[float]:
    kind = rng.randrange(4)
    out = [rng.gauss(0, 1) * 10 ** rng.randrange(-8, 8) if kind else round(rng.random(), 2) for _ in range(n)]
    for _ in range(rng.randrange(3)):
        out[rng.randrange(n)] = rng.choice([math.inf, -math.inf, 1e308, -0.0, 0.0, 5e-324])
    return out


@pytest.mark.parametrize("seed", range(6))
def test_windows_and_noise_give_the_same_doubles(seed):
    rng = random.Random(seed)
    for _ in range(40):
        size = rng.choice([1, 2, 8, 32, 64])
        w, ref, rm, ref_rm = Window(size), _RefWindow(size), RollingMedian(size), []
        for v in _values(rng, rng.randrange(1, 600)):
            w.push(v)
            ref.push(v)
            rm.push(v)
            ref_rm = (ref_rm + [v])[-size:]
            assert repr((w.mean(), w.std(), list(w.values()))) == repr(
                (ref.sum / len(ref.values), *_ref_std(ref), list(ref.values)))
            assert repr(rm.median()) == repr(median(ref_rm))
        for tails in (True, False):
            assert repr(w.diff_sigma(tails)) == repr(_ref_diff_sigma(list(ref.values), tails))
            assert repr(diff_sigma(deque(ref.values), tails)) == repr(_ref_diff_sigma(list(ref.values), tails))


def _ref_std(ref: _RefWindow) -> tuple[float]:
    n = len(ref.values)
    if n < 2:
        return (0.0,)
    m = ref.sum / n
    return (math.sqrt(max(ref.sumsq / n - m * m, 0.0) * n / (n - 1)),)


def test_held_out_quality_keeps_the_same_points_with_one_name_test_per_name():
    rng = random.Random(3)
    names = ["eval/accuracy", "train/loss", "eval/mAP", "opt/lr", "val_acc", "episode_return", "eval/loss"]
    q, want = HeldOutQuality(), {}
    for step in range(400):
        values = {n: rng.choice([rng.random(), math.nan, math.inf]) for n in rng.sample(names, 4)}
        q.push(step, values)
        for name, value in values.items():  # the old rule, one regex test per value
            if math.isfinite(value) and (pattern._QUALITY.match(name) or pattern._RETURN.search(name)):
                want.setdefault(name, []).append([step, value])
                want[name] = want[name][-256:]
    assert q.series == want and set(want) >= {"eval/accuracy"}
    with pytest.raises(TypeError):  # a value that is no number fails as before (the detector set counts it)
        q.push(401, {"train/loss": None})
