"""Stalls of two kinds in a row, and stalls of another kind on a rhythm's grid (`detect.stall_patterns`).

* An eval's slow record followed by a data-loader stall in the next record are two stalls (`stalls_in`):
  merged, the loader's stall was dated at the eval, its rhythm (every P steps) lost a beat and was keyed
  after the eval.
* A beat of a rhythm is a stall of its kind (`beat_start`): a busy machine's small slow step that falls one
  period before a loader's first big stall is not where the loader's rhythm began."""

from __future__ import annotations

import random

from stethoscope.detect.stall_patterns import EVAL, beat_start, stalls_in
from stethoscope.detect.throughput import ThroughputDetector
from stethoscope.records import StepRecord

from .conftest import replay


def test_an_eval_and_the_loader_stall_after_it_are_two_stalls() -> None:
    streak = [[280, 0.056, 0.016, True, [EVAL]], [281, 0.184, 0.016, True, []]]
    stalls = stalls_in(streak)
    assert [s[0] for s in stalls] == [280, 281]
    assert [EVAL in s[3] for s in stalls] == [True, False]
    assert abs(stalls[1][1] - (0.016 + 0.168)) < 1e-9  # the loader's own excess, not the eval's with it
    # one kind in a row stays one stall, priced by all its records and dated at its first
    one = stalls_in([[10, 0.05, 0.01, True, []], [11, 0.03, 0.01, True, []], [12, 0.011, 0.01, False, []]])
    assert len(one) == 1 and one[0][0] == 10 and abs(one[0][1] - 0.07) < 1e-9


def test_a_small_slow_step_one_period_before_a_loader_rhythm_is_not_its_first_beat() -> None:
    # scattered slow steps of a busy machine (13 ms over the level), one of them at 257; from 265 the loader
    # stalls 170 ms every 8 steps: the chain 289, 281, 273, 265 walked on to 257 and keyed the rhythm there
    items = [[s, 0.013, 1.8, []] for s in (129, 166, 173, 219, 257)]
    items += [[s, 0.170, 11.0, []] for s in (265, 273, 281, 289)]
    assert beat_start(items) == 265
    # beats of one kind are all taken: a GC of one size every 20 steps after scattered steps starts at its first
    gc = [[s, 0.013, 1.8, []] for s in (30, 47, 101)] + [[s, 0.08, 5.0, []] for s in (120, 140, 160, 180)]
    assert beat_start(gc) == 120


def _loader_after_evals(seed: int) -> list[StepRecord]:
    """16 ms steps +-5%; an eval every 40 steps adds 40 ms to the record that carries it; a busy machine
    makes ~1 step in 12 20 ms slower; from step 265 the loader stalls 170 ms every 8 steps, so the stall at
    281 falls in the record right after the eval at 280."""
    rng = random.Random(seed)
    out = []
    for step in range(400):
        t = 0.016 * rng.uniform(0.95, 1.05)
        values = {}
        if step % 40 == 0 and step:
            t += 0.040
            values["eval/loss"] = 2.0
        if 100 <= step < 265 and rng.random() < 1 / 12:
            t += 0.020
        if step == 257:
            t += 0.020  # one of the busy machine's, one period before the loader's first stall
        if step >= 265 and (step - 265) % 8 == 0:
            t += 0.170
        values["perf/step_time_s"] = t
        out.append(StepRecord(step, values))
    return out


def test_a_loader_rhythm_through_an_eval_is_dated_where_it_began() -> None:
    for seed in range(3):
        stalls = [f for f in replay(ThroughputDetector(), _loader_after_evals(seed)) if f.type == "periodic_stall"]
        assert any(abs(f.step - 265) <= 2 for f in stalls), (seed, [(f.step, f.message[:70]) for f in stalls])


def test_a_real_loader_rhythm_after_eval_stalls_is_dated_at_its_onset() -> None:
    # bench/gpt_runs stall-s4 (dev), TensorBoard (every 2nd iteration): evals every 40 steps, then the loader
    # stalls every 8 iterations from 258. The evals before it are stalls the chain could have been part of.
    from pathlib import Path

    from stethoscope.diagnose.engine import diagnose_run
    from stethoscope.importers.registry import read_any

    (run,) = read_any(Path(__file__).resolve().parents[1] / "assets" / "gpt_runs" / "stall-s4" / "tb")
    stalls = [f.step for f in diagnose_run(run).findings if f.type == "periodic_stall"]
    assert any(abs(s - 258) <= 4 for s in stalls), stalls
