"""Slow steps that are the evals themselves (`detect.throughput_findings.is_eval_time`).

A step whose time includes an eval (and the checkpoint save that goes with it) at the cadence the user chose pays
for that eval: a cost known in advance, not a stall of the training loop (PaddleNLP few-shot run: 9 slow steps,
each right after an eval every 100 steps, 48% of the run time, was a WARNING periodic_stall). Info, with its cost;
a stall with no eval beside it, or a loader that stalls every few steps and meets an eval now and then, stays
a warning."""

from __future__ import annotations

from stethoscope.detect.throughput import ThroughputDetector

from .conftest import make_records, of_type, replay

_N = 1000


def _stalls(eval_every: int | None, slow_every: int = 100) -> list:
    times, evals = [1.0] * _N, [None] * _N
    for s in range(slow_every - 1, _N - 1, slow_every):
        times[s + 1] = 10.0  # the step after step s took the eval's (and the save's) time
    if eval_every is not None:
        for s in range(eval_every - 1, _N - 1, eval_every):
            evals[s] = 0.5
    return of_type(replay(ThroughputDetector(), make_records(range(_N), STEP_TIME=times, EVAL_LOSS=evals)),
                   "periodic_stall")


def test_slow_steps_that_are_each_an_eval_are_its_cost_not_a_stall() -> None:
    (f,) = _stalls(eval_every=100)
    assert f.severity == "info" and f.evidence["eval_time"] is True, f
    assert "the evals' own time" in f.message and "costing" in f.message


def test_the_same_slow_steps_without_an_eval_beside_them_are_a_warning() -> None:
    (f,) = _stalls(eval_every=None)
    assert f.severity == "warning" and "eval_time" not in f.evidence, f


def test_a_loader_stalling_every_few_steps_that_meets_an_eval_now_and_then_is_still_a_warning() -> None:
    (f,) = _stalls(eval_every=100, slow_every=25)  # a quarter of the stalls follow an eval
    assert f.severity == "warning" and "eval_time" not in f.evidence, f
