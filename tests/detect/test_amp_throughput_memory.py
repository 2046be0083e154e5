from __future__ import annotations

import random

import pytest

from stethoscope.detect.amp import LossScaleDetector
from stethoscope.detect.memory import MemoryDetector
from stethoscope.detect.throughput import ThroughputDetector

from stethoscope.detect.registry import merge_findings
from stethoscope.detect.throughput import HANG_SERIES

from .conftest import make_records, of_type, replay


def test_loss_scale_collapse_below_one():
    scales = [0.5, 0.25, 0.125, 0.0625, 0.03125]
    (f,) = of_type(replay(LossScaleDetector(), make_records([10198] * 1 + [10199, 10200, 10201, 10202], LOSS_SCALE=scales)),
                   "loss_scale_collapse")
    assert f.step == 10198 and f.severity == "error"


def test_overflow_storm_and_routine_halvings():
    scales = [2.0 ** 20, 2.0 ** 20, 2.0 ** 19, 2.0 ** 18, 2.0 ** 17, 2.0 ** 17, 2.0 ** 16, 2.0 ** 15]
    (f,) = of_type(replay(LossScaleDetector(), make_records(range(17061, 17069), LOSS_SCALE=scales)),
                   "loss_scale_collapse")
    assert f.step == 17063 and f.severity == "warning" and f.evidence["halvings"] >= 4
    routine = [65536.0 if (s // 1000) % 2 else 32768.0 for s in range(5000)]
    assert not replay(LossScaleDetector(), make_records(range(5000), LOSS_SCALE=routine))


def test_persistent_slowdown_vs_one_slow_step():
    times = [105.16, 105.17, 106.25, 110.17, 111.14]
    (f,) = of_type(replay(ThroughputDetector(), make_records(range(42780, 42785), STEP_TIME=times)), "throughput_drop")
    assert f.step == 42783 and f.severity == "info", "two slow records (12 s lost) are news, not yet a page"
    assert "still slow at the last record" in f.message and "so far" not in f.message
    times = [1.097] * 10 + [35.4] + [1.02] * 5
    found = replay(ThroughputDetector(), make_records(range(2900, 3060, 10), STEP_TIME=times))
    assert [f.severity for f in found] == ["info"], "an eval + checkpoint step is harmless once"


def test_a_slowdown_becomes_a_warning_once_it_has_lasted_and_cost_real_time():
    times = [105.16, 105.17, 106.25] + [110.5 + 0.3 * (i % 3) for i in range(40)]
    det, live = ThroughputDetector(), []
    for r in make_records(range(42780, 42823), STEP_TIME=times):
        live += [(r.step, f.severity) for f in det.update(r) if f.type == "throughput_drop"]
    assert live[0][1] == "info" and 42783 <= live[0][0] <= 42784, live
    escalated = [step for step, sev in live if sev == "warning"]
    assert escalated and escalated[0] >= 42783 + 19, live  # 20 records, over 60 s lost: the page
    (f,) = of_type(merge_findings(det.finish()), "throughput_drop")
    assert f.severity == "warning" and f.evidence["lost_s"] > 60


def test_periodic_gc_pauses_are_one_finding():
    dt = [0.683, 0.681, 1.350, 0.667, 0.688, 1.356, 0.683, 0.680, 1.349, 0.690]
    found = replay(ThroughputDetector(), make_records(range(18, 28), STEP_TIME=dt))
    (f,) = of_type(found, "periodic_stall")
    assert f.step == 20 and f.evidence["dips"] == 3 and f.evidence["median_gap_steps"] == 3
    assert f.severity == "info", "three pauses have cost 2 s"
    dt = [1.35 if i % 3 == 2 else 0.68 + 0.01 * (i % 2) for i in range(300)]  # the same pattern, 100 pauses
    (f,) = of_type(replay(ThroughputDetector(), make_records(range(18, 318), STEP_TIME=dt)), "periodic_stall")
    assert f.severity == "warning" and f.evidence["regular"] and "about every 3 steps" in f.message
    assert "garbage" not in f.message and not f.causes, "no GC series: no GC named"


def test_jittery_dense_step_times_are_silent():
    rng = random.Random(0)
    times = [0.02 * (1 + abs(rng.gauss(0, 0.03))) for _ in range(5000)]
    found = replay(ThroughputDetector(), make_records(range(5000), STEP_TIME=times))
    assert all(f.severity == "info" for f in found)


def test_rates_are_inverted_and_batch_ramp_up_is_normalised():
    tps = [1000.0] * 20 + [700.0] * 20
    (f,) = of_type(replay(ThroughputDetector(), make_records(range(40), TOKENS_PER_S=tps)), "throughput_drop")
    assert f.step == 20
    times = [31.0] * 10 + [62.0] * 10
    batch = [80.0] * 10 + [160.0] * 10
    assert not replay(ThroughputDetector(), make_records(range(20), STEP_TIME=times, GLOBAL_BATCH_SIZE=batch))


def test_memory_leak_and_pressure():
    steps = list(range(0, 1000, 10))
    alloc = [10.0 + 0.02 * i for i in range(len(steps))]
    (leak,) = of_type(replay(MemoryDetector(), make_records(steps, CUDA_ALLOCATED=alloc)), "memory_leak")
    assert leak.severity == "warning" and leak.evidence["gib_per_1000_steps"] > 1
    saw = [10.0 + (i % 5) for i in range(len(steps))]
    assert not replay(MemoryDetector(), make_records(steps, CUDA_ALLOCATED=saw))
    peak = [70.0] * 50 + [78.5] * 50
    (p,) = of_type(replay(MemoryDetector(), make_records(steps, CUDA_PEAK=peak, CUDA_TOTAL=[80.0] * 100)),
                   "memory_pressure")
    assert p.step == 500


def test_regular_stalls_start_where_the_pattern_starts():
    times = [0.02] * 1200
    for s in (143, 311):  # two stray slow steps first (a busy machine)
        times[s] = 0.045
    for s in range(500, 1200, 50):  # then a 5 s pause every 50 steps
        times[s] = 5.0
    found = replay(ThroughputDetector(), make_records(range(1200), STEP_TIME=times))
    (stall,) = [f for f in of_type(found, "periodic_stall") if f.severity == "warning"]
    assert stall.step == 500 and stall.evidence["period_steps"] == 50


def test_scattered_slow_steps_without_a_cause_are_a_busy_machine_not_a_page():
    import random

    rng = random.Random(1)
    times = [0.5 * (1 + 0.02 * rng.random()) for _ in range(3000)]
    for s in rng.sample(range(50, 3000), 150):  # 5% of steps x2-x4 at random: 150 s lost, ~15% of the run
        times[s] *= rng.uniform(2.0, 4.0)
    found = replay(ThroughputDetector(), make_records(range(3000), STEP_TIME=times))
    stalls = of_type(found, "periodic_stall")
    assert stalls and all(f.severity == "info" for f in stalls), [(f.severity, f.message) for f in stalls]
    assert any("scattered slow steps" in f.message and "nothing recorded" in f.message for f in stalls)
    assert not any("GC" in f.message or "garbage" in f.message for f in stalls)


def test_a_slowdown_while_other_work_takes_the_cpu_is_info_with_that_cause():
    times = [0.04] * 200 + [0.17] * 700 + [0.04] * 100
    starved = [90.0] * 200 + [21.0] * 700 + [90.0] * 100  # the process got a fifth of a core
    (f,) = of_type(replay(ThroughputDetector(), make_records(range(1000), STEP_TIME=times, CPU_PCT=starved)),
                   "throughput_drop")
    assert f.severity == "info" and f.evidence["cpu_pct_during"] == 21.0
    assert "other work on the machine took the CPU" in f.causes[0]
    assert "back to normal at step 900" in f.message and "so far" not in f.message
    busy = [90.0] * 1000  # the same slowdown with the process busy all along: its own work grew
    (f,) = of_type(replay(ThroughputDetector(), make_records(range(1000), STEP_TIME=times, CPU_PCT=busy)),
                   "throughput_drop")
    assert f.severity == "warning" and not f.causes and "back to normal at step 900" in f.message


def test_the_step_that_holds_a_hang_is_not_a_stall():
    times = [0.05] * 400
    times[201] = 300.0  # the step after 200 waited 5 minutes: the watchdog reported the hang
    records = make_records(range(400), STEP_TIME=times)
    records[200].values[HANG_SERIES] = 0.0  # its point at the last step before the hang (0 once resolved)
    found = replay(ThroughputDetector(), records)
    assert not of_type(found, "periodic_stall", "throughput_drop"), [f.message for f in found]
    found = replay(ThroughputDetector(), make_records(range(400), STEP_TIME=times))
    assert of_type(found, "periodic_stall"), "without the hang's point the same step is a stall"


def test_stalls_are_pinned_on_evals_gc_and_data_waits_from_the_record():
    n = 400
    times, gc, wait, evals = [0.05] * n, [0.0] * n, [0.001] * n, [None] * n
    for s in (99, 199, 299):  # an eval after step s: step s+1 takes the time
        evals[s] = 2.0
        times[s + 1] = 0.5
    for s in (150, 250):  # a gen-2 collection
        times[s], gc[s] = 0.3, 0.24
    times[330], wait[330] = 0.25, 0.19  # the loader stalled once
    times[370] = 0.3  # and once nobody knows why
    found = replay(ThroughputDetector(), make_records(range(n), STEP_TIME=times, GC_PAUSE=gc, DATA_WAIT=wait,
                                                      EVAL_LOSS=evals))
    (stall,) = of_type(found, "periodic_stall")
    assert stall.evidence["dips"] == 7
    assert stall.evidence["explained_by"] == {"eval": 3, "gc": 2, "data": 1}
    assert stall.causes[:3] == [
        "3 of 7 slow steps were right after an eval (eval/* recorded since the previous record)",
        "2 of 7 slow steps were mostly a Python garbage-collection pause (perf/gc_pause_s)",
        "1 of 7 slow steps were mostly waiting for data (perf/data_wait_s)",
    ]
    assert "3 of them right after an eval" in stall.message


def test_one_slow_step_after_an_eval_says_so():
    times, evals = [0.05] * 60, [None] * 60
    evals[39], times[40] = 1.9, 0.6
    (f,) = replay(ThroughputDetector(), make_records(range(60), STEP_TIME=times, EVAL_LOSS=evals))
    assert f.type == "periodic_stall" and f.severity == "info" and f.step == 40
    assert "right after an eval" in f.message and "checkpoint" not in f.message
    times[40], evals[39] = 0.6, None  # the same stall without an eval: the generic guesses
    (f,) = replay(ThroughputDetector(), make_records(range(60), STEP_TIME=times, EVAL_LOSS=evals))
    assert "nothing recorded" in f.message and "GC" not in f.message and not f.causes


def _jittery(slow_from: int | None, seed: int = 3) -> list:
    """Step times of a shared machine: 100 ms typical, 10% of steps x1.5-x5 (p95 about x3)."""
    import random

    from stethoscope.detect.registry import DetectorSet, merge_findings
    from stethoscope.records import StepRecord

    rng = random.Random(seed)
    ds = DetectorSet()
    out = []
    for s in range(2000):
        t = 0.1 * (1 + 0.05 * rng.random())
        if rng.random() < 0.1:
            t *= rng.uniform(1.5, 5.0)
        if slow_from is not None and s >= slow_from:
            t *= 2.5
        out += ds.update(StepRecord(s, {"perf/step_time_s": t, "train/loss": 2.0}))
    out += ds.finish()
    return [f for f in merge_findings(out) if not f.evidence.get("withdrawn") and not f.evidence.get("transient")]


def test_heavy_tailed_jitter_alone_is_no_slowdown_warning():
    found = _jittery(None)
    assert not [f for f in found if f.type == "throughput_drop" and f.severity != "info"], \
        [(f.step, f.message) for f in found if f.type == "throughput_drop"]


def test_a_real_slowdown_stands_out_against_the_jitter_and_says_so():
    found = _jittery(1200)
    drops = [f for f in found if f.type == "throughput_drop" and f.severity == "warning"]
    assert drops and abs(drops[0].step - 1200) <= 3, [(f.step, f.severity, f.message) for f in found]
    ev = drops[0].evidence
    assert 0.09 <= ev["level"] <= 0.12 and 0.24 <= ev["slow_level"] <= 0.3  # seconds per step, as logged
    assert ev["typical_spread"] > 0 and ev["duration_steps"] >= 700


@pytest.mark.parametrize("key, unit", [("time", 1e-3), ("Batch (t)", 1.0), ("seconds", 1.0),
                                       ("interval_runtime", 1.0), ("train/time", 1e-3)])
def test_a_step_time_under_another_name_is_read_with_its_unit(key, unit):
    """A slowdown in a step time logged as `time` (ms by its magnitude), `seconds`, `Batch (t)` ..."""
    from stethoscope.records import StepRecord

    level = 0.8 if unit == 1.0 else 800.0  # 0.8 s either way
    times = [level * (1 + 0.01 * (i % 3)) for i in range(300)] + [2 * level] * 300
    found = replay(ThroughputDetector(), [StepRecord(i, {key: t, "train/loss": 1.0}) for i, t in enumerate(times)])
    (f,) = of_type(found, "throughput_drop")
    assert 299 <= f.step <= 302 and f.severity == "warning", f  # 240 s lost
    assert abs(f.evidence["level"] - 0.8) < 0.05 and abs(f.evidence["slow_level"] - 1.6) < 0.05  # seconds


def test_a_clock_under_a_time_name_is_not_a_step_time():
    from stethoscope.records import StepRecord

    clock = [1.7e9 + 0.5 * i + (30.0 if i >= 300 else 0.0) for i in range(600)]  # a timestamp: grows every record
    assert not replay(ThroughputDetector(), [StepRecord(i, {"time": t}) for i, t in enumerate(clock)])


def test_contention_on_an_already_busy_machine_and_not_on_a_gpu_run():
    """The demo on a loaded machine: its share was 25% of a core before and fell to 7%; a CPU run's steps are
    CPU work, so that is contention whatever the share before. A GPU run whose CPU share falls may be waiting
    on its device: no contention claimed there."""
    times = [0.16] * 300 + [0.57] * 300 + [0.16] * 100
    cpu = [25.0] * 300 + [7.0] * 300 + [25.0] * 100
    (f,) = of_type(replay(ThroughputDetector(), make_records(range(700), STEP_TIME=times, CPU_PCT=cpu)),
                   "throughput_drop")
    assert f.severity == "info" and "other work on the machine took the CPU" in f.causes[0]
    gpu = [10.0] * 700  # the run reports CUDA memory: a device run
    (f,) = of_type(replay(ThroughputDetector(), make_records(range(700), STEP_TIME=times, CPU_PCT=cpu,
                                                             CUDA_ALLOCATED=gpu)), "throughput_drop")
    assert f.severity == "warning" and not f.causes


def test_a_peak_that_stepped_up_once_is_no_leak():
    """A real OLMo-1B log prints its peak GPU memory: 94.3 GiB for 1,500 steps, then a new high-water mark at
    104 GiB (a longer batch): a high-water mark only grows, and one step up is no leak (it read '+0 GiB per
    1000 steps' beside 'keeps growing')."""
    from stethoscope.detect.memory import MemoryDetector

    steps = list(range(1, 2001, 10))
    peak = [94.3 if s < 1500 else 104.0 for s in steps]
    assert not of_type(replay(MemoryDetector(), make_records(steps, CUDA_PEAK=peak)), "memory_leak")
    steady = [20.0 + 0.02 * s for s in steps]  # 40 GiB over the run, a little every step: a leak
    (leak,) = of_type(replay(MemoryDetector(), make_records(steps, CUDA_PEAK=steady)), "memory_leak")
    assert 19 < leak.evidence["gib_per_1000_steps"] < 21
