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
    times = _bimodal(300, 2.2, rng) + _bimodal(200, 3.5, rng)  # +60% from record 300 (seconds: 260 s lost)
    found = replay(ThroughputDetector(), make_records(range(0, 2500, 5), STEP_TIME=times))
    assert [f.type for f in found] == ["throughput_drop"], found  # one slowdown, not one per fast record
    f = found[0]
    # records 301-303 of this seed sit at the old level (the fast mode of the new one): the data place
    # the onset at 304 as much as at 300, and the noise leaves a ramp from the old level open too: a ramp
    # starting 4 records earlier fits them as well (`detect.slowdown.ramp_onset`; a real gradual slowdown
    # in such noise was dated 9 records late by the step fit alone)
    assert 1480 <= f.step <= 1520, f.step
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
    times = [2.0] * 100 + [3.2] * 60 + [2.0] * 40  # 72 s lost: a warning, over by step 160
    found = replay(ThroughputDetector(), make_records(range(200), STEP_TIME=times))
    ended = [f for f in found if f.type == "throughput_drop" and f.end_step is not None]
    assert ended and ended[-1].evidence["recovered"] is True and ended[-1].severity == "warning"
    assert "back to normal at step 160" in ended[-1].message and "so far" not in ended[-1].message
    times = [1.0] * 100 + [1.6] * 60 + [1.0] * 40  # the same at half the step time: 36 s lost
    found = replay(ThroughputDetector(), make_records(range(200), STEP_TIME=times))
    assert [f.severity for f in found if f.type == "throughput_drop"] == ["info"]


# 23 step times (s) of a run logged every 20 steps on a shared machine: the noise is half the level
_COARSE = [9.56, 3.82, 11.0, 12.8, 6.11, 9.04, 4.27, 9.03, 3.32, 6.62, 3.58, 10.2, 6.21, 8.84, 4.67, 7.76, 8.29,
           9.72, 9.82, 9.78, 11.7, 5.23, 10.1]


def test_a_short_coarse_log_is_tested_against_the_records_it_has():
    """60 records of a run logged every 20 steps: each slow record alone is under the per-record threshold
    (the noise is half the level), but 37 records at 2.7x after 23 are a slowdown. The same short log
    without one stays quiet."""
    rng = random.Random(5)
    before = list(_COARSE)
    after = [22.0 * rng.uniform(0.9, 1.15) for _ in range(37)]
    found = replay(ThroughputDetector(), make_records(range(20, 1220, 20), STEP_TIME=before + after))
    drops = [f for f in found if f.type == "throughput_drop" and f.severity == "warning"]
    assert drops and 460 <= drops[0].step <= 500, found
    quiet = (_COARSE * 3)[:60]
    found = replay(ThroughputDetector(), make_records(range(20, 1220, 20), STEP_TIME=quiet))
    assert not [f for f in found if f.severity != "info"], found
    assert find_shift([1.0] * 15 + [1.5] * 16, 0.03, z_needed(31)) is None  # less than a block of reference
    assert find_shift([1.0] * 16 + [1.5] * 16, 0.03, z_needed(32)) is not None
