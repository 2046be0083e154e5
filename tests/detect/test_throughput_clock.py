"""A log that keeps only a clock (W&B's `_runtime`, TensorBoard's wall times: `perf/elapsed_s`) and no step time:
its steps are timed by the clock, so a slowdown or a stall in it is found as in a log of step times."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import pytest

from stethoscope.detect.names import ELAPSED
from stethoscope.detect.throughput import ThroughputDetector
from stethoscope.detect.throughput_clock import StepClock
from stethoscope.records import LOSS, STEP_TIME, StepRecord

from .conftest import replay


def _times(n: int = 1100, onset: int = 600, seed: int = 0) -> list[float]:
    """0.25 s a step +-3%, 0.4 s from `onset` on."""
    rng = random.Random(seed)
    return [(0.25 if i < onset else 0.4) * rng.uniform(0.97, 1.03) for i in range(1, n + 1)]


def _clock_records(times: list[float], digits: int | None = 6) -> list[StepRecord]:
    clock = list(itertools.accumulate(times))
    return [StepRecord(i, {LOSS: 2.0, ELAPSED: round(c, digits) if digits is not None else c})
            for i, c in enumerate(clock, start=1)]


def test_a_clock_times_the_steps_like_a_logged_step_time() -> None:
    times = _times()
    by_clock = replay(ThroughputDetector(), _clock_records(times))
    by_step_time = replay(ThroughputDetector(), [StepRecord(i, {STEP_TIME: t}) for i, t in enumerate(times, start=1)])
    drops = [f for f in by_clock if f.type == "throughput_drop"]
    assert len(drops) == 1 and 599 <= drops[0].step <= 602, by_clock
    twin = [f for f in by_step_time if f.type == "throughput_drop"][0]
    # priced in seconds as a step time is (a rate is not), so graded the same
    assert drops[0].severity == twin.severity == "warning"  # 75 s lost: a minute and more
    assert drops[0].evidence["lost_s"] == pytest.approx(twin.evidence["lost_s"], rel=0.02)
    assert "s" in drops[0].message.split("step time up")[1][:40]


def test_a_clock_in_whole_seconds_does_not_time_quarter_second_steps() -> None:
    # 0.25 s steps under a clock printed in whole seconds: 0, 0, 0, 1, 0, ... per record; read only over
    # 30 s spans it is steady, and nothing is slow
    found = replay(ThroughputDetector(), _clock_records(_times(onset=10**9), digits=0))
    assert [f for f in found if f.type in ("throughput_drop", "periodic_stall")] == []


def test_a_clock_that_goes_back_starts_over() -> None:
    clock = StepClock()
    assert [clock.seconds(s, c) for s, c in ((1, 0.5), (2, 1.0), (3, 0.25), (4, 0.75))] == [None, 0.5, None, 0.5]
    state = clock.state_dict()
    again = StepClock()
    again.load_state_dict(json.loads(json.dumps(state)))
    assert again.seconds(6, 1.75) == pytest.approx(0.5)


def test_a_tensorboard_log_without_step_times_is_timed_by_its_wall_clock(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    from stethoscope.diagnose.engine import diagnose_run
    from stethoscope.importers.registry import read_any

    torch.set_num_threads(1)
    times = _times(n=600, onset=360, seed=3)
    wall = 1.7e9 + 0.0
    with SummaryWriter(str(tmp_path)) as w:
        for step, t in enumerate(times):
            wall += t
            w.add_scalar("train/loss", 2.0 + 0.001 * (step % 7), step, walltime=wall)
            w.add_scalar("train/lr", 1e-3, step, walltime=wall + 0.001)
    (run,) = read_any(tmp_path)
    clock = {p.step: p.value for p in run.points if p.name == ELAPSED}
    assert clock[0] == 0.0 and clock[10] == pytest.approx(sum(times[1:11]), abs=1e-3)
    # the clock goes in step order: one row a step, no "resume" (steps going back) that resets the detectors
    from stethoscope.diagnose.table import Table

    assert Table.from_columns(run.columns).steps.tolist() == list(range(600))
    drops = [f for f in diagnose_run(run).findings if f.type == "throughput_drop"]
    assert drops and 358 <= drops[0].step <= 362, drops


def test_data_loader_stalls_after_evals_are_a_pattern_of_their_own() -> None:
    # gpt_runs stall-s2 (nanoGPT): each eval (every 40 steps) makes its step 4x slow, a busy machine makes a few
    # steps 2x slow, then from step 265 the data loader stalls every 8 steps (12x). The evals' dips are the
    # evals': the loader's stalls, far bigger than any unexplained dip before, start their own pattern there
    from stethoscope.records import EVAL_LOSS

    rng = random.Random(5)
    records = []
    for step in range(1, 481):
        t = 0.015 * rng.uniform(0.97, 1.03)
        values = {LOSS: 2.0}
        if step % 40 == 0:
            values[EVAL_LOSS] = 2.1
            t *= 4
        elif step in (117, 129, 219, 233, 257):
            t *= 2
        elif step >= 265 and (step - 265) % 8 == 0:
            t *= 12
        values[STEP_TIME] = t
        records.append(StepRecord(step, values))
    stalls = [f for f in replay(ThroughputDetector(), records) if f.type == "periodic_stall"]
    assert any(263 <= f.step <= 267 for f in stalls), [(f.step, f.message[:80]) for f in stalls]


def test_a_stall_right_after_a_slow_eval_record_is_the_loaders_not_the_evals() -> None:
    # gpt_runs stall-s1 (nanoGPT): the eval logged at step 160 is in step 160's own time (26 ms of 6.5); the
    # loader's first stall is step 161 (130 ms). Blaming 161 on the eval too hid the stalls' start until 166
    from stethoscope.records import EVAL_LOSS

    rng = random.Random(7)
    records = []
    for step in range(1, 361):
        t = 0.0065 * rng.uniform(0.97, 1.03)
        values = {LOSS: 2.0}
        if step % 40 == 0:
            values[EVAL_LOSS] = 2.1
            t *= 4
        elif step in (26, 47, 49, 53):
            t *= 1.6
        elif step >= 161 and (step - 161) % 5 == 0:
            t *= 20
        values[STEP_TIME] = t
        records.append(StepRecord(step, values))
    stalls = [f for f in replay(ThroughputDetector(), records) if f.type == "periodic_stall"]
    assert any(159 <= f.step <= 163 for f in stalls), [(f.step, f.message[:80]) for f in stalls]


def test_an_eval_logged_ahead_of_the_train_steps_does_not_bend_the_clock(tmp_path: Path) -> None:
    # a writer that logs the eval at the step it will be shown at (k + 5) before the train losses of k+1..k+4:
    # the clock follows the train loss, so it neither steps back (a "resume" that resets the detectors) nor
    # dates step k+5 at step k's time
    torch = pytest.importorskip("torch")
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    from stethoscope.diagnose.table import Table
    from stethoscope.importers.registry import read_any

    torch.set_num_threads(1)
    with SummaryWriter(str(tmp_path)) as w:
        for step in range(100):
            if step % 10 == 0:
                w.add_scalar("eval/loss", 2.5, step + 5, walltime=1000.0 + step)
            w.add_scalar("train/loss", 2.0, step, walltime=1000.0 + step)
    (run,) = read_any(tmp_path)
    clock = {p.step: p.value for p in run.points if p.name == ELAPSED}
    assert clock == {k: float(k) for k in range(100)}
    assert Table.from_columns(run.columns).steps.tolist() == list(range(100))  # one row a step: no resume
