"""A loss that climbs from its first record is the run's start, not a spike (`detect.spike._early_climb`).

YOLOv9 from pretrained weights (wild-logs-3 F1, results.csv, one row an epoch): the train loss went 3.74, 4.34, 5.13,
5.54 over epochs 0-3 under its LR warm-up, then fell back over 30 epochs. It was a WARNING loss_spike at epoch 2,
"x1.27 its recent level 4.037": a level of two records that were already climbing."""

from __future__ import annotations

from stethoscope.detect.spike import SpikeDetector
from stethoscope.findings.catalogue import LOSS_SPIKE
from stethoscope.records import LOSS, StepRecord

YOLO9 = [3.7351, 4.3393, 5.1314, 5.5402, 5.3222, 5.147, 5.0099, 4.9136, 4.8473, 4.7777, 4.7242, 4.6869]


def _spikes(values: list[float]) -> list:
    det, out = SpikeDetector(), []
    for i, v in enumerate(values):
        out += det.update(StepRecord(i, {LOSS: v}))
    out += det.finish()
    last: dict = {}
    for f in out:
        last[(f.type, f.step)] = f
    return [f for f in last.values() if f.type == LOSS_SPIKE]


def _tail(start: float, n: int = 60) -> list[float]:
    return [start * (0.995 ** i) * (1 + 0.01 * ((i * 7) % 5 - 2)) for i in range(n)]


def test_a_run_that_starts_by_climbing_is_no_spike_at_warning() -> None:
    found = _spikes(YOLO9 + _tail(4.65))
    assert found and all(f.severity == "info" for f in found), [(f.step, f.severity) for f in found]
    assert "climbing since its first record" in found[0].message and found[0].evidence["early_climb"]


def test_a_jump_from_a_flat_start_is_still_a_spike() -> None:
    found = _spikes([2.50, 2.52, 2.49, 10.0] + _tail(2.45))
    assert [(f.step, f.severity) for f in found] == [(3, "warning")]


def test_a_jump_far_past_the_climbs_pace_is_still_a_spike() -> None:
    found = _spikes([3.0, 3.4, 12.0, 12.5] + _tail(3.2))
    assert [(f.step, f.severity) for f in found] == [(2, "warning")], [(f.step, f.severity) for f in found]
