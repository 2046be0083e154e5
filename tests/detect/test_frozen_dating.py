"""When the weights stopped, dated from the optimizer's momentum (`detect.eval_frozen`).

With the gradients gone, Adam (beta1 = 0.9) keeps moving the weights by a step that shrinks 0.9x per step: about
1 / (1 - beta1) = 10 steps' worth of motion after the stop.
* A tail that rose past the eval's minimum: the momentum carried the weights past it, so the stop came within that
  reach before the minimum's eval, half of it on average (was: 2/3 into the interval before, 11 steps before a
  32-step eval; Lightning, Ignite and mmengine stops were dated 8-14 steps early).
* A stop in an interval whose eval ROSE (a levelled-off or overfitting curve: Keras stops at an epoch's start):
  the move into that eval holds the coast's first part and the move after it the rest, so their ratio says how
  far into the interval the stop was (was: the interval's end, one epoch late)."""

from __future__ import annotations

import pytest

from stethoscope.diagnose.engine import diagnose_run
from stethoscope.findings.catalogue import FROZEN_LOSS
from stethoscope.importers import read_any
from tests.detect.test_eval_frozen import CASES, ROOT, _stops


def _stop(case: str) -> tuple[int, int, int]:
    c = CASES[case]
    (d,) = [diagnose_run(run) for run in read_any(ROOT / c["file"])]
    (label,) = [lb["step"] for lb in c["labels"] if lb["type"] == "plateau"]
    losses = [s for s, _ in c["logged_loss"]]
    gap = sorted(b - a for a, b in zip(losses, losses[1:]))[len(losses) // 2]
    (f,) = [f for f in d.findings if f.type == FROZEN_LOSS]
    return f.step, label, gap


@pytest.mark.parametrize("case", ["keras_fit-frozen-s2-console", "keras_fit-frozen-s9-console"])
def test_a_keras_stop_at_an_epochs_start_is_dated_there_not_at_its_end(case: str) -> None:
    # s2: 0.8941 (416), 0.921 (448: +0.027, the coast's first part), 0.9223 (480: +0.0013, the rest): 448 before
    step, label, _ = _stop(case)
    assert abs(step - label) <= 8, (step, label)  # 2 logged steps: the console prints every 4-5 batches


@pytest.mark.parametrize("case", ["lightning_trainer-frozen-s19-file", "mmengine_runner-frozen-s19-file",
                                  "lightning_trainer-frozen-s6-file"])
def test_a_stop_before_the_evals_minimum_is_dated_within_the_momentums_reach_of_it(case: str) -> None:
    # s19: falls 0.15, 0.056 into 127, then +0.014, +0.001 (the momentum past the minimum); stop 126, was 116
    step, label, gap = _stop(case)
    assert abs(step - label) <= 2 * gap, (step, label, gap)


def test_a_flat_curve_then_a_coast_is_dated_by_the_tails_decay() -> None:
    # a curve that levelled off at 0.90 (+-0.001), stopped 4 steps into the 32-step interval ending at 448:
    # the move into 448 holds 1 - 0.9^28 of the coast, the move into 480 0.9^28 (1 - 0.9^32) of it
    k = 0.03
    flat = [(32 * (i + 1), v) for i, v in enumerate([1.30, 1.10, 0.98, 0.93, 0.905])]
    flat += [(192 + 32 * i, 0.900 + (0.001 if i % 2 else -0.001)) for i in range(8)]  # 192..416
    b = 0.9 ** 28
    tail = [(448, 0.899 + k * (1 - b)), (480, 0.899 + k * (1 - b) + k * b * (1 - 0.9 ** 32))]
    tail += [(512, tail[-1][1] + k * b * 0.9 ** 32 * (1 - 0.9 ** 32))]
    tail += [(544 + 32 * i, tail[-1][1]) for i in range(3)]
    (f,) = _stops(flat + [(s, round(v, 6)) for s, v in tail])
    assert abs(f.step - 420) <= 3, f.step
