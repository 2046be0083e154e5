"""The stop of frozen weights dated between two sparse evals by the pace of the fall before it
(`detect.eval_frozen._stop_in`): the last interval that learned fell by a share of what the interval before
fell per step; that share of the interval still learned. A deceleration read off two noisy moves (min(1, ratio))
only ever shrank the expectation and dated stops late (evals 40 steps apart: 196 for a stop at 185)."""

from __future__ import annotations

from stethoscope.detect.eval_frozen import EvalFrozen


def _stop(evals: list[tuple[int, float]]):
    ef, out = EvalFrozen(), []
    for step, v in evals:
        ef.lr(1e-3)
        f = ef.update(step, v, 1e-3)
        if f is not None:
            out.append(f)
    return out


def test_the_stop_is_dated_by_the_pace_of_the_interval_before() -> None:
    # a tiny GPT's val loss every 40 steps, LR 0 from step 185 (the log still shows the schedule's LR)
    evals = [(0, 4.5091), (40, 2.8837), (80, 2.7072), (120, 2.5950), (160, 2.5287), (200, 2.4931),
             (240, 2.4931), (280, 2.4931), (320, 2.4931)]
    (f,) = _stop(evals)
    # 0.0356 fallen against 0.0663 per 40 steps before: 54% of the interval learned -> ~181, not 196
    assert 175 <= f.step <= 188, f.step
    assert f.evidence["last_learning_eval"] == 200


def test_uneven_eval_intervals_compare_paces_per_step() -> None:
    # the eval before the last learned over 80 steps, the last interval is 40: the pace is per step
    evals = [(0, 4.5), (80, 3.0), (160, 2.80), (240, 2.68), (280, 2.65), (320, 2.65), (360, 2.65)]
    (f,) = _stop(evals)
    # 0.12 per 80 steps = 0.06 per 40; the last 40 steps fell 0.03: half of them learned
    assert 255 <= f.step <= 265, f.step
