"""A slowdown's onset is where the records leave the level right before it. A window reaching back over a
faster stretch (a machine less busy for a while, an epoch of lighter batches) holds two old levels; the
changepoint fitted over both fell where the faster stretch began. A slowdown's first records are not faster
than the level before it, so the onset is fitted again from the faster stretch (`detect.slowdown.ramp_onset`)."""

from __future__ import annotations

import random
from pathlib import Path

from stethoscope.detect.slowdown import ramp_onset
from stethoscope.diagnose.engine import diagnose_run
from stethoscope.importers.registry import read_any

REAL_TRAINERS = Path(__file__).resolve().parents[1] / "assets" / "real_trainers"


def _faster_then_ramp(seed: int) -> tuple[list[float], list[float]]:
    """12 records at 10 ms, 10 records at 6 ms (the machine less busy), then from record 22 a climb of
    0.5 ms a record from 6 ms (a leak): the climb stays under the first level for 8 records."""
    rng = random.Random(seed)
    ys = [0.010] * 12 + [0.006] * 10 + [0.006 + 0.0005 * k for k in range(1, 19)]
    return [float(x) for x in range(len(ys))], [y * rng.uniform(0.97, 1.03) for y in ys]


def test_a_climb_from_a_faster_stretch_is_dated_where_it_leaves_that_stretch() -> None:
    for seed in range(10):
        xs, ys = _faster_then_ramp(seed)
        # before: dated at 12, where the faster stretch began (one changepoint over two old levels)
        assert abs(xs[ramp_onset(xs, ys)] - 22) <= 2, (seed, ramp_onset(xs, ys))


def test_a_ramp_whose_first_records_sit_low_in_the_noise_keeps_its_onset() -> None:
    # a climb from one level, its first records drawn low in the +-10% noise: no faster stretch, nothing to refit
    rng = random.Random(5)
    ys = [0.010 * rng.uniform(0.9, 1.1) for _ in range(20)] + [0.0091, 0.0092, 0.0093]
    ys += [0.010 + 0.0006 * k * rng.uniform(0.9, 1.1) for k in range(4, 20)]
    xs = [float(x) for x in range(len(ys))]
    assert 17 <= xs[ramp_onset(xs, ys)] <= 23


def test_a_real_mmengine_slowdown_after_a_faster_epoch_is_dated_at_its_onset() -> None:
    # bench/real_trainers mmengine_runner-slowdown-s1 (dev): each iteration from 147 sleeps (k - 147) x 0.6 ms;
    # `time` is a 10-iteration running mean printed every 4 iterations. The epoch before ran at 0.0008 s, the
    # one before that at ~0.011 s: the slowdown was dated at 108, where the faster epoch began.
    (run,) = read_any(REAL_TRAINERS / "mmengine_runner-slowdown-s1" / "console.log.gz")
    drops = [f.step for f in diagnose_run(run).findings if f.type == "throughput_drop"]
    assert drops and all(s is not None for s in drops)
    assert any(abs(s - 147) <= 8 for s in drops), drops
