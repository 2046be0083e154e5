"""A loss that spikes and comes straight back again and again (`detect.spike` + `spike_incident.recurring`).

Stable-Baselines3 PPO's value loss (wild-logs-2, progress.csv every 10 steps) jumped to ~10,000 from a level of
150-1,350 seven times, each back at the next record: seven WARNING loss_spike, one per jump. After the first, a spike
no bigger than one the run came back from is one more of the same: info naming it. One incident to act on."""

from __future__ import annotations

import json
import random

from stethoscope.detect.spike import SpikeDetector
from stethoscope.findings.catalogue import DIVERGENCE, LOSS_SPIKE
from stethoscope.records import LOSS, StepRecord


def _run(values: list[float], every: int = 10) -> list:
    det, out = SpikeDetector(), []
    for i, v in enumerate(values):
        out += det.update(StepRecord(every * (i + 1), {LOSS: v}))
    out += det.finish()
    last: dict = {}
    for f in out:  # the last finding per key, as the pipeline keeps it
        last[(f.type, f.step)] = f
    return [f for f in last.values() if f.type in (LOSS_SPIKE, DIVERGENCE)]


def _series(spikes: dict[int, float], n: int = 120, seed: int = 0) -> list[float]:
    rnd = random.Random(seed)
    return [spikes.get(i, 1000.0 * (1 + 0.02 * rnd.gauss(0, 1))) for i in range(n)]


def test_spikes_of_one_size_that_keep_coming_back_are_one_warning() -> None:
    for seed in range(3):
        found = _run(_series({40: 9000.0, 55: 9300.0, 70: 8800.0, 85: 9500.0, 100: 9100.0}, seed=seed))
        warnings = [f for f in found if f.severity != "info"]
        assert [f.step for f in warnings] == [410], (seed, [(f.step, f.severity) for f in found])
        later = sorted((f for f in found if f.step > 410), key=lambda f: f.step)
        assert [f.step for f in later] == [560, 710, 860, 1010]
        assert all("one more of the spikes" in f.message and f.evidence["recurring_since"] >= 410 for f in later)


def test_a_spike_far_bigger_than_those_the_run_came_back_from_is_still_a_warning() -> None:
    found = _run(_series({40: 9000.0, 60: 9200.0, 80: 40000.0}))
    assert [(f.step, f.severity) for f in sorted(found, key=lambda f: f.step)] == [
        (410, "warning"), (610, "info"), (810, "warning")]


def test_a_spike_of_a_size_seen_before_that_does_not_come_back_is_paged() -> None:
    values = _series({40: 9000.0})[:80] + [9000.0] * 12  # the second one stays up
    found = _run(values)
    late = [f for f in found if f.step >= 810]
    assert any(f.severity != "info" for f in late), [(f.type, f.step, f.severity) for f in found]


def test_live_the_recurring_spike_never_pages_and_the_state_carries_the_first() -> None:
    det = SpikeDetector()
    values = _series({40: 9000.0, 55: 9300.0})
    paged = []
    for i, v in enumerate(values[:50]):
        paged += [f for f in det.update(StepRecord(10 * (i + 1), {LOSS: v})) if f.severity != "info"]
    restored = SpikeDetector()
    restored.load_state_dict(json.loads(json.dumps(det.state_dict())))
    for i, v in enumerate(values[50:], start=50):
        paged += [f for f in restored.update(StepRecord(10 * (i + 1), {LOSS: v})) if f.severity != "info"]
    assert {f.step for f in paged} == {410}, [(f.step, f.severity, f.message[-60:]) for f in paged]
