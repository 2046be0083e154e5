"""A plateau after a healthy descent (the model stops learning mid-run), told apart from convergence."""

from __future__ import annotations

import math
import random

import pytest

from stethoscope.records import LOSS, LR, StepRecord

from .conftest import replay_set


def _run(curve, lr=None, n: int = 3000, seed: int = 0, noise: float = 0.03) -> list:
    rng = random.Random(seed)
    records = []
    for s in range(n):
        values = {LOSS: curve(s) * (1 + rng.gauss(0, noise))}
        if lr is not None:
            values[LR] = lr(s)
        records.append(StepRecord(s, values))
    return [f for f in replay_set(records) if f.type in ("plateau", "underfitting") and
            (f.severity != "info" or f.evidence.get("after_descent"))]


def _exp(s: float, tau: float = 400.0) -> float:
    return 2.5 + 8 * math.exp(-s / tau)


def _cosine(s: int, n: int = 3000) -> float:
    return 3e-4 * min(1.0, (s + 1) / 200) * 0.5 * (1 + math.cos(math.pi * s / n))


@pytest.mark.parametrize("seed", range(3))
def test_a_loss_that_stops_falling_mid_run_is_a_plateau_at_the_knee(seed):
    (f,) = _run(lambda s: _exp(min(s, 800)), seed=seed)
    assert f.type == "plateau" and f.severity == "info" and 740 <= f.step <= 860, f  # noise: +-40 steps
    assert f.evidence["after_descent"] and "stopped improving" in f.message and "still flat" in f.message
    assert "check that the LR is not 0" in f.message  # info: a stop or a floor, what to check says which
    (f,) = _run(lambda s: 10 - 7 * min(s, 2000) / 2000, seed=seed)  # a straight descent that stops
    assert 1940 <= f.step <= 2080, f


@pytest.mark.parametrize("seed", range(3))
def test_convergence_is_no_plateau(seed):
    assert not _run(_exp, seed=seed)
    assert not _run(_exp, _cosine, seed=seed)
    assert not _run(lambda s: _exp(s, 100), seed=seed)  # converged early, flat for 2500 steps
    assert not _run(lambda s: 2 + 5 * (s + 10) ** -0.5, seed=seed)  # a power law


def test_a_spike_that_recovers_onto_the_plateau_is_no_knee():
    def curve(s: int) -> float:
        base = _exp(min(s, 2500), 150)
        return base * (3.0 if 1200 <= s < 1260 else 1.0)  # a bad stretch of data, then back

    assert not _run(curve)


def test_a_knee_where_the_lr_annealed_to_nothing_is_the_schedule_ending():
    def lr(s: int) -> float:
        return 3e-4 if s < 700 else 3e-4 * max(0.0, 1 - (s - 700) / 90) + 1e-7  # annealed by step 790

    assert not _run(lambda s: _exp(min(s, 800)), lr)
    assert _run(lambda s: _exp(min(s, 800)), lambda s: 3e-4)  # the same stop with the LR still high


def test_a_fine_tune_that_reaches_its_floor_is_info_and_says_so():
    rng = random.Random(2)
    records = [StepRecord(s, {LOSS: (0.2 + 2.0 * math.exp(-min(s, 400) / 150)) * (1 + rng.gauss(0, 0.03))})
               for s in range(2000)]
    found = [f for f in replay_set(records) if f.type == "plateau"]
    assert found and all(f.severity == "info" for f in found), found
    assert "converged rather than stopped" in found[0].message and "stopped learning" not in found[0].message
