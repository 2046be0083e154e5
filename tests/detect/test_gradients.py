from __future__ import annotations

from stethoscope.detect.config import DetectConfig
from stethoscope.detect.gradients import GradientDetector

from .conftest import make_records, of_type, replay


def test_clipping_on_most_steps():
    steps = list(range(300))
    coef = [0.5 if s % 4 else 1.0 for s in steps]
    (f,) = of_type(replay(GradientDetector(), make_records(steps, GRAD_CLIP_COEF=coef)), "clipping")
    assert f.severity == "warning" and f.step == 49 and "LR is probably too high" in f.message


def test_occasional_clipping_is_fine():
    steps = list(range(300))
    coef = [0.5 if s % 10 == 0 else 1.0 for s in steps]
    assert not replay(GradientDetector(), make_records(steps, GRAD_CLIP_COEF=coef))


def test_update_ratio_warns_before_the_loss_moves():
    steps = list(range(20))
    ratio = [1e-3] * 10 + [0.1] * 10
    (f,) = of_type(replay(GradientDetector(), make_records(steps, UPDATE_RATIO=ratio)), "update_ratio")
    assert f.step == 10 and f.severity == "warning" and "LR too high" in f.message


def test_vanishing_and_dead_gradients():
    steps = list(range(100))
    grad = [1.0] * 60 + [1e-5] * 40
    (f,) = of_type(replay(GradientDetector(), make_records(steps, GRAD_NORM=grad)), "grad_vanishing")
    assert f.step == 60
    assert not of_type(replay(GradientDetector(), make_records(range(10), GRAD_NORM=[0.0] * 10)),
                       "grad_vanishing"), "a norm that is 0.000 from the first record is a logging artefact"
    (z,) = of_type(replay(GradientDetector(), make_records(range(10), GRAD_ZERO_FRAC=[1.0] * 10)), "grad_vanishing")
    assert z.step == 0


def test_absolute_ceiling_and_slow_growth():
    steps = list(range(200))
    grad = [1.0 * 1.03 ** max(0, s - 60) for s in steps]
    (growth,) = of_type(replay(GradientDetector(), make_records(steps, GRAD_NORM=grad)), "grad_explosion")
    assert growth.severity == "warning" and "slow climb" in growth.message
    found = replay(GradientDetector(DetectConfig(grad_norm_ceiling=100.0)),
                   make_records(range(5), GRAD_NORM=[1.0, 2.0, 500.0, 600.0, 1.0]))
    (ceil,) = of_type(found, "grad_explosion")
    assert ceil.step == 2 and ceil.end_step == 3 and ceil.severity == "error"


def test_clipping_for_a_while_after_warm_up_is_info_and_never_pages():
    """The demo's seed 3: clipping on most steps from the end of warm-up for ~50 steps, then rarely."""
    steps = list(range(400))
    coef = [0.5 if 40 <= s < 110 or s % 10 == 0 else 1.0 for s in steps]
    det, live = GradientDetector(), []
    for r in make_records(steps, GRAD_CLIP_COEF=coef):
        live += [(f.severity, f.message) for f in det.update(r) if f.type == "clipping"]
    assert live and all(sev == "info" for sev, _ in live), live
    assert "back to normal" in live[-1][1] and "LR is probably too high" not in live[-1][1]
