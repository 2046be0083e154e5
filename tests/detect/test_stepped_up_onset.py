"""A slowdown that grows inside an open one ("slower still from step N") is dated where its climb left the
slow level (the change-point fit, `detect.throughput_onset.fit_onset`), not at the first record that crossed
three times that level. Records an eval explains are left out of that fit."""

from __future__ import annotations

import random

from stethoscope.detect.throughput import ThroughputDetector
from stethoscope.detect.throughput_onset import eval_stalls
from stethoscope.records import EVAL_LOSS, STEP_TIME, StepRecord

from .conftest import replay


def _times(ramp_from: int, seed: int = 0) -> tuple[list[int], list[float]]:
    """Every 4th step: 1 ms +-3% to step 400, 2 ms from 404 (a slowdown that stays open), and from `ramp_from`
    each step 0.6 ms slower than the one before (2.4 ms a record: three times the slow level 3 records in)."""
    rng = random.Random(seed)
    steps = list(range(4, 801, 4))
    times = [(0.001 if s <= 400 else 0.002 + 0.0006 * max(0, s - ramp_from + 1)) * rng.uniform(0.97, 1.03)
             for s in steps]
    return steps, times


def _stepped_up(records: list[StepRecord]) -> list[int]:
    found = replay(ThroughputDetector(), records)
    return sorted({f.step for f in found if f.type == "throughput_drop"})


def test_a_climb_inside_an_open_slowdown_is_dated_where_it_began():
    for seed, ramp_from in ((0, 601), (1, 642), (2, 555)):
        steps, times = _times(ramp_from, seed)
        starts = _stepped_up([StepRecord(s, {STEP_TIME: t}) for s, t in zip(steps, times)])
        assert len(starts) == 2 and 402 <= starts[0] <= 406, starts
        # the first record 3x the slow level is ~8 steps in: the threshold's date, two records late
        assert abs(starts[1] - ramp_from) <= 4, (seed, ramp_from, starts)


def test_an_eval_stall_among_the_first_records_over_is_no_part_of_the_climb():
    """The climb's first record 3x the slow level, then two records that hold evals (logged between the records):
    the newest records of the fit, they would read as the new level."""
    steps, times = _times(601, 3)
    records = []
    for s, t in zip(steps, times):
        if s in (612, 616):
            records.append(StepRecord(s - 2, {EVAL_LOSS: 1.0}))  # an eval between two records: its time in the next
            t = 0.2
        records.append(StepRecord(s, {STEP_TIME: t}))
    starts = _stepped_up(records)
    assert abs(starts[1] - 601) <= 4, starts


def test_a_log_that_evaluates_before_every_record_keeps_its_climb_in_the_fit():
    """skorch prints one row per epoch, each after its validation: the eval flag is on every record and says
    nothing of where the time went, so no record of the climb is left out as an eval's."""
    for seed, ramp_from in ((4, 601), (5, 642)):
        steps, times = _times(ramp_from, seed)
        records = []
        for s, t in zip(steps, times):
            records.append(StepRecord(s - 1, {EVAL_LOSS: 1.0}))
            records.append(StepRecord(s, {STEP_TIME: t}))
        starts = _stepped_up(records)
        assert abs(starts[1] - ramp_from) <= 4, (seed, ramp_from, starts)


def test_eval_stalls_are_the_evals_far_above_the_records_no_eval_explains():
    over = [[608, 0.007, 0.002, []], [612, 0.2, 0.002, ["eval"]], [616, 0.2, 0.002, ["eval"]]]
    assert eval_stalls(over) == {612, 616}
    assert eval_stalls([[x[0], x[1], x[2], ["eval"]] for x in over]) == frozenset()  # every record after an eval
    assert eval_stalls([[608, 0.007, 0.002, []], [612, 0.012, 0.002, ["eval"]]]) == frozenset()  # part of the climb
