"""Cross-rank judgement of the gathered health vectors (pure): stragglers, desync, memory divergence."""

from __future__ import annotations

from stethoscope.detect.straggler import RankHealth


def _rows(compute, step=100, mem=None, gc=None):
    return [{"rank": r, "step": step, "step_s": 0.05, "compute_s": c, "data_s": 0.001,
             "mem_gib": (mem or {}).get(r, 2.0), "finding": 0, "gc_s": (gc or {}).get(r, 0.0), "n": 20}
            for r, c in enumerate(compute)]


def test_a_rank_slow_for_two_reports_is_named_once_and_resolved_when_it_recovers():
    h = RankHealth(threshold=0.8, reports=2)
    assert h.update(_rows([0.020, 0.026, 0.0202]), 50) == []  # once is not persistent
    found = h.update(_rows([0.020, 0.026, 0.0201]), 100)
    assert [(f.type, f.evidence["rank"]) for f in found] == [("straggler", 1)]
    assert "rank 1 is a straggler" in found[0].message and found[0].evidence["score"] < 0.8
    assert found[0].evidence["fastest_rank"] == 0
    assert h.update(_rows([0.020, 0.026, 0.0201]), 150) == []  # still open: not named again
    back = h.update(_rows([0.020, 0.0205, 0.0201]), 200)
    assert [(f.type, f.end_step, f.evidence["recovered"]) for f in back] == [("straggler", 200, True)]


def test_noise_and_a_blip_are_not_stragglers():
    h = RankHealth()
    for i, compute in enumerate(([0.020, 0.021, 0.0195], [0.020, 0.030, 0.020], [0.021, 0.020, 0.0205])):
        assert h.update(_rows(compute), 50 * (i + 1)) == []


def test_ranks_out_of_step_and_a_rank_with_far_more_memory_are_named():
    h = RankHealth()
    rows = _rows([0.02, 0.02, 0.02], mem={0: 9.0}, gc={2: 0.5})
    rows[2]["step"] = 90
    found = h.update(rows, 100)
    kinds = {f.evidence["kind"]: f for f in found}
    assert set(kinds) == {"step_desync", "memory"}
    assert kinds["step_desync"].evidence["ranks"] == [2] and "rank 2 at step 90" in kinds["step_desync"].message
    assert "garbage collection" in kinds["step_desync"].causes[0]
    assert kinds["memory"].evidence["rank"] == 0 and "9.00 GiB" in kinds["memory"].message


def test_a_straggler_whose_gpu_throttles_says_so_first():
    from stethoscope import records as R
    from stethoscope.probe.health import gpu_fields

    h = RankHealth(threshold=0.8, reports=1)
    rows = _rows([0.020, 0.031, 0.0201])
    for r in rows:
        r["gpu_throttle"], r["gpu_temp_c"] = gpu_fields({R.GPU_TEMP: 66.0})
    rows[1]["gpu_throttle"], rows[1]["gpu_temp_c"] = gpu_fields({R.GPU_THROTTLE_THERMAL: 1.0, R.GPU_TEMP: 89.0})
    (f,) = h.update(rows, 100)
    assert f.evidence["rank"] == 1 and f.evidence["gpu_throttle"] == 2
    assert f.causes[0] == ("its GPU is thermally throttled (or in a hardware slowdown) at 89 °C while the other "
                           "ranks' are not (NVML)")
    assert gpu_fields({}) == (0.0, 0.0) and gpu_fields({R.GPU_THROTTLE_POWER: 1.0})[0] == 1.0
    h2 = RankHealth(threshold=0.8, reports=1)  # every GPU at its power cap: not this rank's own cause
    same = _rows([0.020, 0.031, 0.0201])
    for r in same:
        r["gpu_throttle"] = 1.0
    assert not any("GPU" in c for c in h2.update(same, 100)[0].causes)


def test_a_noise_sized_compute_gap_does_not_name_a_straggler():
    """user-trial-2 item 8: the health vectors of a 2-rank gloo run (rank 1 slept 20 ms after opt.step): forward
    medians 0.219 ms and 0.393 ms in 23.9 ms steps. A x1.8 ratio on 0.17 ms, 0.7% of the step, is timer noise:
    no straggler is named through it. A gap that is a real share of the step still is."""
    h = RankHealth(threshold=0.8, reports=2)
    for step in (50, 100, 150):
        rows = [{"rank": 0, "step": step, "step_s": 0.02393, "compute_s": 0.000219, "data_s": 0.0001, "mem_gib": 0.3,
                 "finding": 0, "gc_s": 0.0, "n": 50},
                {"rank": 1, "step": step, "step_s": 0.02376, "compute_s": 0.000393, "data_s": 0.0001, "mem_gib": 0.3,
                 "finding": 0, "gc_s": 0.0, "n": 50}]
        assert h.update(rows, step) == [], step
    assert h.scores[1]["compute_s"] == 1.0
    h = RankHealth(threshold=0.8, reports=1)
    rows[1]["compute_s"] = 0.0055  # 5.3 ms more forward in a 24 ms step: a real share
    (f,) = h.update(rows, 200)
    assert f.evidence["rank"] == 1 and f.evidence["signal"] == "compute (forward) time"


def test_a_rank_late_to_the_gradient_all_reduce_is_named_by_its_time_outside_the_backward_pass():
    """user-trial-2 item 8, the rest: the 20 ms rank 1 spent after opt.step made rank 0 wait inside its backward
    (DDP's all-reduce); step times agree and forwards are alike, but the step less the backward pass is 2x."""
    h = RankHealth(threshold=0.8, reports=1)
    rows = [{"rank": r, "step": 100, "step_s": 0.0240, "compute_s": 0.0004, "data_s": 0.0001, "mem_gib": 0.3,
             "finding": 0, "gc_s": 0.0, "n": 50, "own_s": own} for r, own in enumerate((0.0011, 0.0212))]
    (f,) = h.update(rows, 100)
    assert f.evidence["rank"] == 1 and f.evidence["signal"].startswith("time outside the backward pass")
    assert "21.2 ms against 1.1 ms on rank 0" in f.message
    rows[1]["own_s"] = 0.0016  # 0.5 ms more, 2% of the step: noise
    assert RankHealth(threshold=0.8, reports=1).update(rows, 100) == []
    for r in rows:
        r["own_s"] = 0.0  # no torch optimizer stepped: no signal, no finding
    assert RankHealth(threshold=0.8, reports=1).update(rows, 100) == []
