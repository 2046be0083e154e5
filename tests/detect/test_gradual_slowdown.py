"""A gradual slowdown (each step a little slower than the one before, from some onset): one growing
`throughput_drop`, dated at the ramp's start and priced by what it really cost, not a "stall every step"."""

from __future__ import annotations

import random
from pathlib import Path

from stethoscope.detect.slowdown import extend, growth, lost, open_drop, ramp_onset
from stethoscope.detect.throughput import ThroughputDetector
from stethoscope.diagnose.engine import diagnose_run
from stethoscope.importers.registry import read_any

from .conftest import make_records, replay


def _ramp(n: int = 1000, onset: int = 600, seed: int = 0) -> list[float]:
    """0.25 s per step +-3% until `onset`, then 1% of it slower each step (5x at step 1000)."""
    rng = random.Random(seed)
    return [0.25 * (1 + max(0, i - onset) / 100) * rng.uniform(0.97, 1.03) for i in range(1, n + 1)]


def test_a_growing_slowdown_is_one_warning_dated_at_its_start_and_priced_in_full():
    times = _ramp()
    truth_lost = sum(t - 0.25 for t in times[600:])  # ~200 s of ~450 s
    found = replay(ThroughputDetector(), make_records(range(1, 1001), STEP_TIME=times))
    assert [f.type for f in found] == ["throughput_drop"], found  # no "periodic stall every 1 step"
    f = found[0]
    assert f.severity == "warning"
    assert 599 <= f.step <= 603, f.step
    assert f.evidence["growing"] is True
    assert f.evidence["slow_level"] > 1.0  # the level reached, not the first records' 0.33 s
    assert abs(f.evidence["lost_s"] - truth_lost) < 0.15 * truth_lost, (f.evidence["lost_s"], truth_lost)
    assert f.evidence["time_cost"] > 0.35
    assert "growing: from" in f.message and "at step 1000" in f.message


def test_a_step_slowdown_holds_its_level_and_is_not_called_growing():
    rng = random.Random(1)
    times = [(0.25 if i <= 600 else 0.4) * rng.uniform(0.97, 1.03) for i in range(1, 1001)]
    found = replay(ThroughputDetector(), make_records(range(1, 1001), STEP_TIME=times))
    drops = [f for f in found if f.type == "throughput_drop"]
    assert len(drops) == 1 and drops[0].severity == "warning"
    assert 600 <= drops[0].step <= 602, drops[0].step
    assert drops[0].evidence["growing"] is False and "growing" not in drops[0].message
    assert abs(drops[0].evidence["lost_s"] - 0.15 * 400) < 6


def test_a_console_log_of_a_gradual_slowdown_diagnoses_as_a_growing_drop(tmp_path: Path):
    rng = random.Random(2)
    times = _ramp(seed=2)
    lines = [f"step {i} | loss {4.0 * 0.999 ** i * rng.uniform(0.99, 1.01):.4f} | interval_runtime {t:.3f} | lr 1e-4"
             for i, t in enumerate(times, start=1)]
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    found = diagnose_run(read_any(path)[0]).findings
    slow = [f for f in found if f.type in ("throughput_drop", "periodic_stall")]
    assert [(f.type, f.severity) for f in slow] == [("throughput_drop", "warning")], slow
    assert 597 <= slow[0].step <= 603 and slow[0].evidence["growing"]  # the ramp's first step is 601


def test_ramp_onset_dates_a_climb_where_it_left_the_old_level_and_a_jump_where_it_jumped():
    rng = random.Random(4)
    xs = [float(i) for i in range(60)]
    climb = [1.0 * rng.uniform(0.98, 1.02) + max(0, i - 30) * 0.01 for i in range(60)]
    assert abs(ramp_onset(xs, climb) - 30) <= 2
    jump = [(1.0 if i < 40 else 1.5) * rng.uniform(0.98, 1.02) for i in range(60)]
    assert ramp_onset(xs, jump) == 40
    stalls = [v * (20.0 if i % 8 == 3 else 1.0) for i, v in enumerate(jump)]  # big stalls on top are left out
    assert ramp_onset(xs, stalls) == 40


def test_a_drops_cost_follows_its_blocks_and_growth_needs_a_climb():
    d = open_drop(0, 1.0, [2.0] * 8, 8)
    for i in range(8, 64):
        extend(d, 2.0 + i * 0.1 if i >= 32 else 2.0, i)
    assert growth(d) is not None and growth(d)[1] > 1.5 * growth(d)[0]
    flat = open_drop(0, 1.0, [2.0] * 64, 64)
    assert growth(flat) is None and abs(lost(flat) - 64.0) < 1e-9
    flat_with_a_stall = open_drop(0, 1.0, [2.0] * 15 + [50.0], 16)
    assert abs(lost(flat_with_a_stall) - 16.0) < 1e-9  # one stall inside a block does not move its median


def test_a_slowdown_that_steps_up_again_is_a_new_slowdown_not_a_stall_every_record():
    rng = random.Random(5)
    times = [(1.0 if i < 100 else 1.3 if i < 300 else 5.0) * rng.uniform(0.98, 1.02) for i in range(500)]
    found = replay(ThroughputDetector(), make_records(range(500), STEP_TIME=times))
    assert [f.type for f in found] == ["throughput_drop", "throughput_drop"], found
    first, second = found
    assert first.step == 100 and first.end_step == 299 and "slower still from step 300" in first.message
    assert second.step == 300 and second.severity == "warning" and 3.8 < second.evidence["slowdown"] < 4.2


def test_a_real_data_loader_stall_after_a_small_drift_is_dated_at_its_onset():
    """mmengine, logged every 4 steps: a small drift from step ~56, then a 0.15 s fetch every 6 batches from
    step 155 (two of every three records ~10x slower); evals every 32 steps show in two records each."""
    path = Path(__file__).parents[1] / "assets" / "real_trainers" / "mmengine_runner-stall-s3" / "console.log.gz"
    found = diagnose_run(read_any(path)[0]).findings
    drops = [f for f in found if f.type == "throughput_drop"]
    late = [f for f in drops if f.step >= 150]
    assert len(late) == 1 and 147 <= late[0].step <= 163, drops  # +-2 logged steps of 155
    assert late[0].evidence["slowdown"] > 5
    stalls = [f for f in found if f.type == "periodic_stall"]
    # the new level is no train of stalls "about every 4 steps" (every record); the evals' stalls stay stalls
    assert all(f.evidence["period_steps"] != 4 and f.evidence["dips"] <= 16 for f in stalls), stalls


def test_a_real_keras_slowdown_logged_more_often_while_slow_is_dated_in_steps():
    """Keras' console prints a progress line per epoch while fast and many while slow: a climb is a line
    in steps, not in records. Each faulty epoch is a little slower than the one before, from step 705."""
    path = Path(__file__).parents[1] / "assets" / "real_trainers" / "keras_fit-slowdown-s0" / "console.log.gz"
    found = diagnose_run(read_any(path)[0]).findings
    drops = [f for f in found if f.type == "throughput_drop"]
    assert len(drops) == 1 and 699 <= drops[0].step <= 711, drops  # +-2 logged steps (3 steps each)
    assert drops[0].evidence["slowdown"] > 3


def _gc_run(seed: int = 1) -> list[float]:
    """0.78 ms steps, one odd x4 step at 240, then from 462 a 40 ms GC pause every 25 steps, each followed by
    a few steps that are still slow (caches refilling): 2.0, 1.2, 1.1 ms..."""
    rng = random.Random(seed)
    times = [0.78e-3 * rng.uniform(0.97, 1.03) for _ in range(1000)]
    times[240] *= 4
    for at in range(462, 1000, 25):
        for k, ms in enumerate((41.0, 2.0, 1.2, 1.1, 0.95)):
            if at + k < 1000:
                times[at + k] = ms * 1e-3 * rng.uniform(0.97, 1.03)
    return times


def test_gc_pauses_with_a_slow_tail_are_one_stall_pattern_from_the_first_pause():
    found = replay(ThroughputDetector(), make_records(range(1000), STEP_TIME=_gc_run()))
    stalls = [f for f in found if f.type == "periodic_stall" and f.evidence["dips"] >= 10]
    # the first pause and its slow tail passed as a short slowdown: priced as a stall by every second of it
    # (not by its median), it is big enough to start the pattern, not to join the odd step at 240
    assert len(stalls) == 1 and 460 <= stalls[0].step <= 464, [(f.type, f.step, f.message[:60]) for f in found]
    assert stalls[0].evidence["worst_ratio"] > 40
