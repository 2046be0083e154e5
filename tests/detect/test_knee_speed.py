"""The knee test's kept index (running sums, sorted step sizes, the window places that can still pass) answers
exactly as the test computed from the points each time did: the reference below is that algorithm, kept here."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

import stethoscope.detect.knee as knee_mod
from stethoscope.detect.knee import KneeTracker
from stethoscope.diagnose.engine import diagnose_run
from stethoscope.importers.registry import read_any
from tests.conftest import REPO, realruns_dir


def _ref_knee(t: KneeTracker, min_records: int, min_steps: int, peak_lr: float) -> dict | None:
    """`KneeTracker.knee` as it was: every place tested from the points each time."""
    pts, n = t.points, len(t.points)
    if n < knee_mod._MIN_POINTS:
        return None
    diffs = sorted(abs(b[1] - a[1]) for a, b in zip(pts, pts[1:]))
    sigma = diffs[len(diffs) // 2] / (0.6745 * math.sqrt(2.0))
    if sigma <= 0:
        return None
    cum = [0.0]
    for p in pts:
        cum.append(cum[-1] + p[1])
    for j in range(3, n):
        k = _ref_test(pts, cum, j, sigma, n)
        if k is None:
            continue
        if (n - j) * t.stride < min_records / 2 or pts[-1][0] - pts[j][0] < min_steps / 2:
            return None
        at = knee_mod._onset(pts, j, k.pop("w"))
        k["step"] = int(pts[at][0])
        lr = pts[at][2]
        if math.isfinite(lr) and peak_lr > 0 and lr < knee_mod._SCHEDULE_END * peak_lr:
            return None
        return k
    return None


def _ref_test(pts, cum, j, sigma, n):
    w = max(4, round(j / 10))
    if j < 4 * w or n - j < 3 * w:
        return None
    sd = sigma * math.sqrt(2.0 / w)
    m1, m2 = (cum[j - w] - cum[j - 2 * w]) / w, (cum[j] - cum[j - w]) / w
    f12 = m1 - m2
    if f12 < 5.0 * sd:
        return None
    m_, m0, m3, m4 = ((cum[a + w] - cum[a]) / w for a in (j - 4 * w, j - 3 * w, j, j + w))
    f01 = m0 - m1
    if f12 < 0.01 * abs(m2) or f01 < 0.5 * f12 or m_ < m0 - sd:
        return None
    if f12 < 0.02 * (pts[0][1] - m2):
        return None
    r = min(1.0, f12 / f01)
    predicted = f12 * (r + r * r)
    if m2 - m4 > 0.25 * predicted + sd:
        return None
    last = (cum[n] - cum[n - w]) / w
    lowest = min((cum[a + w] - cum[a]) / w for a in range(j, n - w + 1, w))
    if abs(m3 - last) > 0.25 * predicted + 2 * sd or m3 - lowest > 0.25 * predicted + 2 * sd:
        return None
    return {"step": int(pts[j][0]), "level": m3, "before_step": int(pts[j - 2 * w][0]), "before": m1,
            "first": pts[0][1], "fall": m1 - m3, "span": int(pts[-1][0] - pts[j][0]), "w": w}


def _same(t: KneeTracker, *args) -> dict | None:
    got, want = t.knee(*args), _ref_knee(t, *args)
    assert repr(got) == repr(want), (len(t.points), got, want)  # repr: NaNs compare, floats to the bit
    return got


def _curve(rng: random.Random, n: int) -> list[float]:
    """A descent that stops (or slows, or never does), in noise, with spikes, steps and odd values sometimes."""
    top, floor, tau = rng.uniform(1, 12), rng.uniform(-1, 3), rng.uniform(20, n)
    stop = rng.choice([None, rng.randrange(n)])
    noise = rng.choice([0.0, 1e-4, 0.01, 0.05, 0.3])
    ys = []
    for s in range(n):
        x = min(s, stop) if stop is not None else s
        y = floor + top * math.exp(-x / tau) if rng.random() > 0.3 else floor + top / (1 + x / tau)
        ys.append(y * (1 + rng.gauss(0, noise)) if noise else y)
    for _ in range(rng.randrange(3)):  # spikes, a level shift
        ys[rng.randrange(n)] *= rng.uniform(2, 20)
    if rng.random() < 0.2:
        at = rng.randrange(n)
        ys[at:] = [y + rng.uniform(-2, 2) for y in ys[at:]]
    if rng.random() < 0.1:
        ys[rng.randrange(n)] = rng.choice([math.inf, -math.inf, math.nan, 1e308, 5e-324])
    if rng.random() < 0.1:
        ys = [round(y, 2) for y in ys]  # quantised: many equal steps, sigma 0
    return ys


@pytest.mark.parametrize("seed", range(8))
def test_the_index_answers_as_the_test_from_scratch_on_random_curves(seed):
    rng = random.Random(seed)
    answered = 0
    for _ in range(16):
        n = rng.randrange(30, 2200)
        t = KneeTracker()
        args = (rng.choice([10, 100, 400]), rng.choice([10, 200, 1000]), rng.choice([0.0, 1e-3]))
        lr = rng.choice([None, 1e-3, 5e-5])
        for s, y in enumerate(_curve(rng, n)):
            t.push(s, y, lr)
            if t.due(s + 1) or rng.random() < 0.02:
                answered += _same(t, *args) is not None
            if rng.random() < 0.002:  # resumed from a checkpoint: the index is rebuilt
                fresh = KneeTracker()
                fresh.load_state_dict(t.state_dict())
                t = fresh
        _same(t, *args)
    assert seed or answered  # seed 0 finds knees: the places that can pass are tested, not only skipped


def test_a_smooth_descent_tests_few_places(monkeypatch):
    """The point of the index: a long descent (where every place used to pass the first bar and fail later) is
    not re-tested place by place at every check."""
    calls = []
    real = knee_mod._test
    monkeypatch.setattr(knee_mod, "_test", lambda *a: calls.append(a[2]) or real(*a))
    t = KneeTracker()
    for s in range(5000):
        t.push(s, 2 + 8 * math.exp(-s / 3000) + 0.001 * math.sin(s), None)
        if t.due(s + 1):
            assert _same(t, 100, 100, 0.0) is None
    assert len(calls) < 50, len(calls)


def _logs() -> list[Path]:
    out = sorted((REPO / "tests" / "assets" / "real_trainers").glob("*/*"))[:12]
    out += [p for d in ("healthy-s0", "frozen-s1", "overfit-s2", "lr_jump-s3") for p in
            sorted((REPO / "tests" / "assets" / "gpt_runs" / d).glob("*.gz"))]
    real = realruns_dir()
    if real is not None:
        out += [p for p in sorted(real.glob("*/*")) if p.name not in ("SOURCE.md", "hparams.yaml")]
    return [p for p in out if p.is_file()]


def test_every_knee_test_of_a_diagnosis_answers_as_before_on_real_logs(monkeypatch):
    calls = []
    real = KneeTracker.knee

    def checked(self, *args):
        got, want = real(self, *args), _ref_knee(self, *args)
        assert repr(got) == repr(want), (len(self.points), got, want)
        calls.append(got)
        return got

    monkeypatch.setattr(KneeTracker, "knee", checked)
    for path in _logs():
        for run in read_any(path):
            diagnose_run(run)
    assert len(calls) > 500, len(calls)
    assert realruns_dir() is None or any(c is not None for c in calls)  # real runs that stop after a descent
