"""The noisy-series slowdown test (`detect.level_shift`) is entered only when its first test can pass; the lists it
needs are built after that: the same findings as building them every time (the old path: `may_shift` always
True), on random step times with shifts, climbs, stalls and odd values, and on real logs."""

from __future__ import annotations

import math
import random

import pytest

import stethoscope.detect.throughput as throughput_mod
from stethoscope.detect.level_shift import BLOCK, MIN_REFERENCE, REFERENCE, _median, may_shift
from stethoscope.detect.throughput import ThroughputDetector
from stethoscope.diagnose.engine import diagnose_run
from stethoscope.importers.registry import read_any
from stethoscope.records import STEP_TIME, StepRecord
from tests.conftest import realruns_dir


def _first_test(values: list[float], min_rel: float) -> bool:  # find_shift's own lines, as they are
    n = len(values)
    if n < BLOCK + MIN_REFERENCE:
        return False
    level, slow = _median(list(values[max(0, n - BLOCK - REFERENCE): -BLOCK])), _median(list(values[-BLOCK:]))
    return not (not level > 0 or slow <= level * (1 + min_rel))


def _times(rng: random.Random, n: int) -> list[float]:
    base, out = rng.uniform(0.01, 2), []
    at, factor = rng.randrange(n), rng.choice([1.0, 1.05, 1.2, 1.6, 3.0])
    if rng.random() < 0.5:  # a shared machine's bimodal step time: no streak forms, only the block test sees it
        return [base * (factor if i >= at else 1.0) * (0.6 if rng.random() < 0.25 else 1.0) * rng.uniform(0.92, 1.08)
                for i in range(n)]
    for i in range(n):
        level = base * (factor if i >= at else 1.0) * (1 + (i - at) / 200 if rng.random() < 0.2 and i > at else 1)
        out.append(level * (rng.choice([1.0, 1.7]) if rng.random() < 0.3 else 1 + rng.gauss(0, 0.05)))
    for _ in range(rng.randrange(3)):
        out[rng.randrange(n)] = rng.choice([math.nan, math.inf, 0.0, -1.0, 50 * base])
    return out


def test_the_first_test_answers_as_find_shifts_own():
    rng = random.Random(1)
    for _ in range(3000):
        values = _times(rng, rng.randrange(1, 200))
        min_rel = rng.choice([0.0, 0.1, 0.3])
        assert may_shift(values[:-1], values[-1], min_rel) == _first_test(values, min_rel)


def _findings(series: list[list[float]]) -> list[str]:
    out = []
    for times in series:
        d = ThroughputDetector()
        for step, t in enumerate(times):
            out += [repr(f) for f in d.update(StepRecord(step * 10, {STEP_TIME: t}))]
        out += [repr(f) for f in d.finish()]
    return out


@pytest.mark.parametrize("seed", range(3))
def test_the_same_slowdowns_as_testing_every_block(seed, monkeypatch):
    rng = random.Random(seed)
    series = [_times(rng, rng.randrange(50, 900)) for _ in range(12)]
    got = _findings(series)
    monkeypatch.setattr(throughput_mod, "may_shift", lambda *a: True)
    assert got == _findings(series) and any("throughput_drop" in f for f in got)


def test_the_same_diagnoses_of_real_logs(monkeypatch):
    real = realruns_dir()
    if real is None:
        pytest.skip("no realruns beside the repository")
    logs = [p for p in sorted(real.glob("*/*")) if p.name not in ("SOURCE.md", "hparams.yaml", "labels.json")]
    got = [repr(diagnose_run(run).to_dict()) for p in logs for run in read_any(p)]
    monkeypatch.setattr(throughput_mod, "may_shift", lambda *a: True)
    assert got == [repr(diagnose_run(run).to_dict()) for p in logs for run in read_any(p)]
