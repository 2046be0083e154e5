"""A loss spike off a converged floor that costs the run nothing is info, however it ends.

A real Marian NMT log (train cost per word 6.7 -> 0.005 over 60,000 updates, a record every 500) gave WARNING
loss_spike for 0.0061 -> 0.01376 at update 35500 (x2.26, 28 sigma) and 0.0064 -> 0.016 at 38500: rises of under
1% of what the run had learned. They stayed up one record and more (500 updates is past divergence_min_steps), so
they were held as warnings though they came back, and each paged an ERROR divergence after one record (500
steps). A spike whose rise is under 5% of what the run had learned (its first loss less the level before the
spike) is info when it came back, however long it took, or when the log ends before it has held 3 records. While it
stays that small it pages nothing, divergence included; a log that ends with it stuck (held 3 records, still 1.5x
its level, under a quarter undone) still ends diverged. A x2 spike on a loss that has not converged, or one that
undoes a big share of the learning, stays a warning.
"""

from __future__ import annotations

import math
import random

import pytest

from stethoscope.detect.spike import SpikeDetector
from stethoscope.records import LOSS, StepRecord, severity_rank

from .conftest import make_records, of_type, replay_set

# (record index, the bump's records as multiples of the floor): a bump held 3 records and back, one held 2 and
# back, one 2 records before the log ends
_BUMPS = [(250, [2.3, 2.4, 2.2]), (320, [2.0, 2.5]), (398, [2.2, 2.4])]


def _loss(start: float, floor: float, bumps: list, seed: int = 0, n: int = 400) -> list[float]:
    """`n` records falling exponentially from `start` to `floor` with 5% noise, `bumps` on top of the floor."""
    rng = random.Random(seed)
    loss = [(floor + (start - floor) * math.exp(-i / 20)) * (1 + 0.05 * rng.gauss(0, 1)) for i in range(n)]
    for at, xs in bumps:
        for k, x in enumerate(xs):
            loss[at + k] = floor * x
    return loss


def _found(loss: list[float], every: int) -> list:
    steps = [i * every for i in range(len(loss))]
    return of_type(replay_set(make_records(steps, LOSS=loss)), "loss_spike", "divergence")


def _show(found: list) -> list:
    return [(f.step, f.severity, f.type, f.message) for f in found]


@pytest.mark.parametrize("every", [1, 500])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bumps_off_a_converged_floor_are_info(every: int, seed: int) -> None:
    found = _found(_loss(6.7, 0.0067, _BUMPS, seed), every)
    spikes = of_type(found, "loss_spike")
    assert sorted(f.step // every for f in spikes) == [250, 320, 398], _show(found)
    assert all(severity_rank(f.severity) < 1 for f in found), _show(found)
    assert all("what the run had learned" in f.message for f in spikes), _show(found)


@pytest.mark.parametrize("every", [1, 500])
def test_a_small_bump_never_pages_while_it_lasts(every: int) -> None:
    # every 500 steps, one record spans divergence_min_steps: the live divergence waits for the records too
    det, out = SpikeDetector(), []
    for i, v in enumerate(_loss(6.7, 0.0067, _BUMPS)):
        out.extend(det.update(StepRecord(i * every, {LOSS: v})))
    out.extend(det.finish())
    assert of_type(out, "loss_spike") and all(severity_rank(f.severity) < 1 for f in out), _show(out)


def test_a_small_rise_stuck_to_the_end_is_still_a_divergence() -> None:
    # x2.3 the floor for the last 8 records (4,000 steps), never coming down: stuck by its records, not too soon
    found = _found(_loss(6.7, 0.0067, [(392, [2.3, 2.4, 2.3, 2.5, 2.4, 2.3, 2.4, 2.4])]), 500)
    assert [f.severity for f in of_type(found, "divergence")] == ["error"], _show(found)


@pytest.mark.parametrize("every", [1, 500])
def test_a_twofold_spike_on_a_loss_far_above_a_converged_floor_stays_a_warning(every: int) -> None:
    # 6.7 -> 0.5 (a thirteenth of the start, not a floor near 0): a bump to x2.3 undoes 10% of the fall
    found = _found(_loss(6.7, 0.5, [(250, [2.3, 2.4, 2.2]), (398, [2.2, 2.4])]), every)
    spikes = of_type(found, "loss_spike")
    assert [f.step // every for f in spikes if f.severity == "warning"] == [250, 398], _show(found)


@pytest.mark.parametrize("every", [1, 500])
def test_a_spike_that_undoes_a_big_share_of_the_learning_stays_a_warning(every: int) -> None:
    # an LM's loss: 10.8 -> 3.6, a bump to x2.3 (8.3): two thirds of the fall undone, then back
    found = _found(_loss(10.8, 3.6, [(250, [2.3, 2.4, 2.2]), (398, [2.2, 2.4])]), every)
    spikes = of_type(found, "loss_spike")
    assert [f.step // every for f in spikes if f.severity == "warning"] == [250, 398], _show(found)
