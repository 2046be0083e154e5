from __future__ import annotations

from stethoscope.detect.lr import LrDetector

from .conftest import make_records, of_type, replay


def _lr(found, word):
    return [f for f in of_type(found, "lr_schedule") if word in f.message]


def test_warm_up_end_and_no_alarm_on_a_normal_schedule():
    steps = list(range(0, 2000, 10))
    lr = [3e-4 * min(1.0, (s + 10) / 500) * (1 - s / 2000) for s in steps]
    found = replay(LrDetector(), make_records(steps, LR=lr))
    (end,) = _lr(found, "warm-up ended")
    assert end.step == 490 and end.severity == "info"
    assert all(f.severity == "info" for f in found)


def test_lr_decaying_to_zero_at_the_end_is_fine_but_stuck_at_zero_is_not():
    steps = list(range(1000))
    decay = [1e-3 * (1 - s / 900) if s < 900 else 0.0 for s in steps]
    assert not [f for f in replay(LrDetector(), make_records(steps, LR=decay)) if f.severity != "info"]
    (f,) = [f for f in replay(LrDetector(), make_records(range(100), LR=[0.0] * 100)) if f.severity == "warning"]
    assert f.step == 0 and "exactly 0" in f.message


def test_an_lr_that_reads_0_from_the_start_while_the_loss_falls_is_a_print_too_coarse():
    """Composer prints floats with 4 decimals: an LR of 1e-5 reads 0.0000 on every line. Where the loss falls
    beyond its noise the weights are being updated: info, not the warning of an LR stuck at 0; a loss that
    only wanders at LR 0 keeps the warning."""
    import random

    rng = random.Random(0)
    steps = list(range(0, 1000, 10))
    falling = [4.0 - s / 1000 + rng.gauss(0, 0.02) for s in steps]
    flat = [4.0 + rng.gauss(0, 0.02) for _ in steps]
    (coarse,) = _lr(replay(LrDetector(), make_records(steps, LR=[0.0] * len(steps), LOSS=falling)), "reads 0")
    assert coarse.severity == "info" and coarse.step == 0
    stuck = replay(LrDetector(), make_records(steps, LR=[0.0] * len(steps), LOSS=flat))
    assert [f.severity for f in stuck if "exactly 0" in f.message] and not _lr(stuck, "reads 0")


def test_lr_jump_on_resume_and_restart():
    found = replay(LrDetector(), make_records([6502, 6503, 6504, 8600, 12000, 12001],
                                              LR=[5.997e-5, 6.0e-5, 6.0e-5, 6.0e-5, 5.999e-5, 5.842e-5]))
    assert [f.step for f in _lr(found, "warm-up ended")] == [6503]
    (jump,) = _lr(found, "jumped")
    assert jump.step == 12001 and jump.severity == "info"
    steps = list(range(1, 61))
    lr = [1e-4 * (1 - (s - 1) / 30) if s <= 30 else 1e-4 * (1 - (s - 31) / 30) for s in steps]
    lr[30] = 0.0
    (restart,) = _lr(replay(LrDetector(), make_records(steps, LR=lr)), "restarted")
    assert restart.step == 31


def test_steps_going_back_are_a_resume():
    found = replay(LrDetector(), make_records([1, 2, 3, 2, 3], LR=[1e-4] * 5))
    assert [f.step for f in _lr(found, "resumed")] == [2]


def test_lr_to_zero_is_reported_as_the_plateau_it_causes():
    """A scheduler bug sets the LR to 0 at step 400: the user sees the loss stop moving; that is the
    finding, from step 400, with the LR as its named cause (and no separate LR warning)."""
    import math
    import random

    from stethoscope.detect.registry import DetectorSet, merge_findings
    from stethoscope.records import StepRecord

    rng = random.Random(1)
    ds = DetectorSet()
    out = []
    level = 4.0
    for s in range(0, 1000, 5):
        lr = 3e-4 if s < 400 else 0.0
        if lr:
            level = 2.0 + 2.0 * math.exp(-s / 150)
        out += ds.update(StepRecord(s, {"train/loss": level + rng.gauss(0, 0.02), "opt/lr": lr}))
    out += ds.finish()
    loud = [f for f in merge_findings(out) if f.severity != "info" and not f.evidence.get("withdrawn")]
    assert [(f.type, f.step) for f in loud] == [("plateau", 400)], [(f.type, f.step, f.message) for f in loud]
    assert "LR went to 0 at step 400" in loud[0].causes[0]
    assert loud[0].end_step == 995


def test_lr_zero_with_a_loss_that_keeps_improving_stays_an_lr_warning():
    from stethoscope.detect.registry import DetectorSet, merge_findings
    from stethoscope.records import StepRecord

    ds = DetectorSet()
    out = []
    for s in range(0, 1000, 5):
        out += ds.update(StepRecord(s, {"train/loss": 4.0 - 0.003 * s, "opt/lr": 3e-4 if s < 400 else 0.0}))
    out += ds.finish()
    loud = [f for f in merge_findings(out) if f.severity != "info"]
    assert [f.type for f in loud] == ["lr_schedule"]
    assert "still improves" in loud[0].message
