"""A recovered loss spike that undoes under 5% of what the run had learned (its first loss less the level before
the spike) cost the run little: info. A real Marian NMT log: cost 6.7 at the start, 0.0086 by step 48,000, a jump
to 0.049 (x5.7 its level, 18 sigma) that came back was a warning. A spike of an LM's loss from 2.3 to 5.5
(38% of its fall from 10.8) stays one."""

from __future__ import annotations

import math
import random

from .conftest import make_records, of_type, replay_set


def _run(floor: float, spike: float, start: float) -> list:
    rng = random.Random(0)
    steps = list(range(500, 60_001, 500))
    loss = [floor + (start - floor) * math.exp(-s / 4000) * (1 + 0.01 * rng.gauss(0, 1))
            + floor * 0.05 * rng.gauss(0, 1) for s in steps]
    loss[steps.index(48_500)] = spike  # one record up, then back
    return make_records(steps, LOSS=loss)


def test_a_spike_off_a_floor_far_below_the_start_is_info() -> None:
    spikes = of_type(replay_set(_run(0.0086, 0.049, 6.7)), "loss_spike")
    assert spikes and all(f.severity == "info" for f in spikes), [(f.severity, f.message) for f in spikes]
    assert "learned" in spikes[-1].message


def test_a_spike_that_undoes_a_fifth_of_the_learning_stays_a_warning() -> None:
    spikes = of_type(replay_set(_run(2.3, 5.5, 10.8)), "loss_spike")
    assert any(f.severity == "warning" for f in spikes), [(f.severity, f.message) for f in spikes]
