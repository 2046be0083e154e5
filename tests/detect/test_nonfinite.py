from __future__ import annotations

import json

from stethoscope.detect.nonfinite import NonFiniteDetector
from stethoscope.records import StepRecord

from .conftest import make_records, of_type, replay

NAN = float("nan")


def test_nan_at_the_exact_step_once_per_incident():
    steps = list(range(2900, 3070, 10))
    loss = [4.0] * 11 + [NAN] * 6
    found = replay(NonFiniteDetector(), make_records(steps, LOSS=loss))
    (f,) = of_type(found, "nan")
    assert f.step == 3010 and f.severity == "critical"
    assert f.evidence["count"] == 6
    assert "still non-finite at the last record" in f.message


def test_live_emits_once_then_one_follow_up():
    det = NonFiniteDetector()
    out = []
    for s in range(200):
        out += det.update(StepRecord(s, {"train/loss": NAN if 10 <= s < 20 else 1.0}))
    assert [f.step for f in out] == [10, 10]  # the opening and, 20 quiet steps later, its follow-up
    assert out[-1].end_step == 19 and out[-1].evidence["recovered"] is True


def test_a_few_grad_norm_only_records_are_a_scaler_skip_and_info():
    steps = list(range(1, 300))
    grad = [NAN if s in (201, 202, 204, 251) else 1.0 for s in steps]
    found = replay(NonFiniteDetector(), make_records(steps, LOSS=[1.0] * len(steps), GRAD_NORM=grad))
    f, g = of_type(found, "nan")  # 47 finite steps between: two incidents (resolve_steps=20)
    assert (f.step, f.end_step, g.step, g.end_step) == (201, 204, 251, 251)
    assert f.severity == g.severity == "info" and "loss scaler" in f.message  # as hf_tinyllama's fp16 skips
    assert "while the loss stayed finite" not in f.message  # the opening's guess replaced by what happened


def test_a_grad_norm_only_burst_that_outlasts_a_scaler_is_critical_then_a_warning():
    det = NonFiniteDetector()
    live = []
    for s in range(1, 200):
        live += det.update(StepRecord(s, {"train/loss": 1.0, "grad/norm": NAN if 100 <= s < 106 else 1.0}))
    assert [(f.step, f.severity) for f in live if f.end_step is None] == [(100, "info"), (100, "critical")]
    (end,) = [f for f in live if f.end_step is not None]
    assert (end.end_step, end.severity) == (105, "warning")


def test_a_loss_that_follows_the_grad_norm_is_critical_at_once():
    det = NonFiniteDetector()
    out = det.update(StepRecord(10, {"train/loss": 1.0, "grad/norm": NAN}))
    out += det.update(StepRecord(11, {"train/loss": NAN, "grad/norm": NAN}))
    assert [f.severity for f in out] == ["info", "critical"] and "train/loss" in out[-1].message


def test_a_burst_after_the_resolve_stretch_is_a_new_incident_and_one_inside_it_is_not():
    det = NonFiniteDetector()
    out = []
    bad = lambda s: 50 <= s < 60 or 79 <= s < 81 or 101 <= s < 110  # noqa: E731
    for s in range(200):
        out += det.update(StepRecord(s, {"train/loss": NAN if bad(s) else 1.0}))
    ends = [(f.step, f.end_step) for f in out if f.end_step is not None]
    assert ends == [(50, 80), (101, 109)]  # 19 finite steps fold the burst at 79 in; 20 close the incident


def test_eval_loss_and_megatron_nan_counter():
    found = replay(NonFiniteDetector(), make_records([1, 2, 3], EVAL_LOSS=[1.0, float("inf"), None]))
    assert of_type(found, "nan")[0].step == 2
    found = replay(NonFiniteDetector(), make_records([10, 20, 30], NAN_ITERS=[0.0, 0.0, 3.0]))
    assert of_type(found, "nan")[0].step == 30


def test_state_roundtrip_does_not_refire():
    det = NonFiniteDetector()
    assert det.update(StepRecord(5, {"train/loss": NAN}))
    det2 = NonFiniteDetector()
    det2.load_state_dict(json.loads(json.dumps(det.state_dict())))
    assert det2.update(StepRecord(6, {"train/loss": NAN})) == []


def _opening_causes(lr, grad, layers=None):
    det = NonFiniteDetector()
    out = []
    for s, (a, g) in enumerate(zip(lr, grad)):
        values = {"train/loss": NAN if g is None else 1.0, "grad/norm": NAN if g is None else g, "opt/lr": a}
        if g is None and layers:
            values.update(layers)
        out += det.update(StepRecord(s, values))
    return out[0].causes


def test_the_records_before_a_nan_rank_its_causes():
    from stethoscope.findings.advice import advise
    from stethoscope.records import Finding

    held = _opening_causes([1e-3] * 40, [0.5] * 39 + [None])
    assert len(held) == 1 and held[0].startswith("the LR held at 0.001") and "not an LR overshoot" in held[0]
    rose = _opening_causes([1e-4 * 1.1 ** s for s in range(40)], [0.5] * 39 + [None])
    assert rose[0].startswith("the LR rose") and "overshoots" in rose[0]
    grew = _opening_causes([1e-3] * 40, [0.5] * 36 + [4.0, 20.0, 90.0, None])
    assert "grew before the first non-finite value" in grew[0]
    layers = _opening_causes([1e-3] * 40, [0.5] * 39 + [None], {"grad/norm/head": NAN, "grad/norm/embed": 0.3})
    assert layers[0] == "non-finite gradients first in head (other layers finite at step 39)"
    assert _opening_causes([1e-3] * 3, [0.5] * 2 + [None]) == []  # too little history to say
    for causes, first_fix in ((held, "find what went non-finite first"), (rose, "roll back to the last good")):
        f = advise(Finding("nan", "critical", 39, "non-finite train/loss", causes=list(causes)))
        assert f.fixes[0].startswith(first_fix) and len(f.causes) == len(f.fixes)
        lr_blamed = [c for c in f.causes if c.startswith("LR too high") or "warm-up" in c]
        assert bool(lr_blamed) == (causes is rose), f.causes  # an LR that held rules the LR causes out
