"""Level shifts in series too noisy for a streak of slow records: the block test of `detect.level_shift`."""

from __future__ import annotations

import random

from stethoscope.detect.level_shift import find_shift, z_needed
from stethoscope.detect.throughput import ThroughputDetector

from .conftest import make_records, replay


def _bimodal(n: int, level: float, rng: random.Random) -> list[float]:
    """A shared machine's step time: mostly `level`, one record in four at 60% of it, +-8% jitter."""
    return [level * (0.6 if rng.random() < 0.25 else 1.0) * rng.uniform(0.92, 1.08) for _ in range(n)]


def test_slowdown_hidden_in_bimodal_noise_is_found_at_its_onset():
    rng = random.Random(3)
    times = _bimodal(300, 2.2e-3, rng) + _bimodal(200, 3.5e-3, rng)  # +60% from record 300
    found = replay(ThroughputDetector(), make_records(range(0, 2500, 5), STEP_TIME=times))
    assert [f.type for f in found] == ["throughput_drop"], found  # one slowdown, not one per fast record
    f = found[0]
    # records 301-303 of this seed sit at the old level (the fast mode of the new one): the data place
    # the onset at 304 as much as at 300
    assert 1500 <= f.step <= 1520, f.step
    assert f.severity == "warning" and f.evidence["slowdown"] > 0.4 and f.end_step == 2495


def test_stationary_bimodal_noise_raises_nothing():
    for seed in range(5):
        times = _bimodal(2000, 2.2e-3, random.Random(seed))
        found = replay(ThroughputDetector(), make_records(range(2000), STEP_TIME=times))
        assert not [f for f in found if f.severity != "info"], (seed, found)


def test_block_test_needs_the_rank_test_and_every_earlier_level():
    flat = [1.0] * 80
    assert find_shift(flat + [1.5] * 16, 0.03, z_needed(100)) is not None
    assert find_shift(flat + [1.02] * 16, 0.03, z_needed(100)) is None  # below min_rel
    slow_phase = [1.0] * 40 + [1.6] * 20 + [1.0] * 40
    assert find_shift(slow_phase + [1.5] * 16, 0.03, z_needed(200)) is None  # the run was slower before


def test_a_slowdown_that_ends_says_it_recovered():
    times = [1.0] * 100 + [1.6] * 60 + [1.0] * 40
    found = replay(ThroughputDetector(), make_records(range(200), STEP_TIME=times))
    ended = [f for f in found if f.type == "throughput_drop" and f.end_step is not None]
    assert ended and ended[-1].evidence["recovered"] is True and ended[-1].severity == "warning"
    assert "back to normal at step 160" in ended[-1].message
