from __future__ import annotations

from stethoscope.findings.advice import ADVICE, CONDITIONAL, NON_PROBLEMS, advise
from stethoscope.findings.catalogue import FINDING_TYPES
from stethoscope.records import Finding


def test_every_problem_type_has_advice():
    for t in FINDING_TYPES:
        if t in ("healthy", "straggler"):
            continue
        assert t in ADVICE, t
        assert ADVICE[t].causes and ADVICE[t].fixes, t
    assert set(ADVICE) <= set(FINDING_TYPES)
    assert {c.type for c in CONDITIONAL} <= set(FINDING_TYPES)


def test_data_specific_causes_stay_first_and_add_their_fixes():
    f = Finding("loss_spike", "warning", 31219, "loss spiked",
                causes=["grad norm rose 4 steps before the loss (0.24 -> 0.95, peak 960)"])
    advise(f)
    assert f.causes[0].startswith("grad norm rose 4 steps")
    assert any("clip gradients and lower the LR" in x for x in f.fixes)
    assert len(f.causes) == len(set(f.causes))


def test_bad_batch_and_fp16_context():
    f = advise(Finding("loss_spike", "warning", 250, "x", causes=["no lead-up: single bad batch at step 250"]))
    assert any("batch ids" in x for x in f.fixes)
    nan = advise(Finding("nan", "critical", 10, "non-finite train/loss"), {"fp16": True})
    assert any("bf16" in x for x in nan.fixes)
    assert any("bf16" in x for x in nan.causes)


def test_known_non_problems_are_listed():
    ids = {n.id for n in NON_PROBLEMS}
    assert {"resume_reset", "hf_grad_accum_loss", "step_avg_nan", "grad_blips"} <= ids
    assert any("35204" in n.why for n in NON_PROBLEMS)


def test_advise_is_idempotent():
    f = advise(advise(Finding("divergence", "error", 5, "diverged")))
    assert len(f.fixes) == len(set(f.fixes))
