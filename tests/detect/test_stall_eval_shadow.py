"""Slow steps in an eval's shadow are its cost (`detect.throughput_causes.slow_causes`).

A time per step that is a smoothed average (tqdm's `s/it`, an EMA) spreads an eval's seconds over the records
after it: the HF Trainer's console read 110 s/it at the step after each eval every 200 steps, then 84, 65, 52 ...
back to 21 s/it, so a record a few steps after the eval was slow again, and a periodic_stall WARNING said
"8 slow steps ... about every 200 steps (6 of them right after an eval)". A slow record that lies within a small
share of the eval cadence after an eval falls at the cadence the run chose: the eval's time (info, naming it).
A stall halfway between evals is still nobody's eval."""

from __future__ import annotations

from stethoscope.detect.throughput import ThroughputDetector

from .conftest import make_records, of_type, replay

_N = 1000


def _stalls(tail_at: int) -> list:
    times, evals = [1.0] * _N, [None] * _N
    for k, e in enumerate(range(99, _N - 10, 100)):
        evals[e] = 0.5
        times[e + 1] = 10.0  # the step after the eval carries its time
        if k in (4, 6, 8):
            times[e + tail_at] = 4.0  # the smoothed time is still high a few records later
    return of_type(replay(ThroughputDetector(), make_records(range(_N), STEP_TIME=times, EVAL_LOSS=evals)),
                   "periodic_stall")


def test_a_smoothed_tail_a_few_steps_after_each_eval_is_the_evals_time() -> None:
    fs = _stalls(tail_at=7)
    assert fs and all(f.severity == "info" for f in fs), fs
    assert any("eval" in f.message for f in fs), fs


def test_slow_steps_halfway_between_evals_are_not_the_evals() -> None:
    fs = _stalls(tail_at=50)
    assert any(f.severity == "warning" for f in fs), fs
