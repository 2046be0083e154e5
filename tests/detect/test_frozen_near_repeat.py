"""One near-repeat of a precise eval loss is no stop unless it is float-exact or ends a momentum tail
(`detect.eval_frozen._repeat_is_news`).

A learning run's eval loss moves ~1e-3 per eval; over many evals and runs one move now and then lands within the
1e-5 relative tolerance of "the same value" (Lightning's metrics.csv, healthy run: 0.8666892051696777 then
0.866693913936615 after moves of 0.0036 and 0.0025). That was a `frozen_loss` warning on a healthy run. Weights
that really stop either stop dead (a float-exact repeat) or coast on the optimizer's momentum (each move a small
share of the one before)."""

from __future__ import annotations

import pytest

from stethoscope.diagnose.engine import diagnose_run
from stethoscope.findings.catalogue import FROZEN_LOSS
from stethoscope.importers import read_any
from tests.detect.test_eval_frozen import CASES, ROOT, _stops

# the Lightning healthy run's evals (metrics.csv), every 32 steps
_HEALTHY = [(31, 1.268251657485962), (63, 1.099815011024475), (95, 0.945275604724884), (127, 0.883442759513855),
            (159, 0.8677577972412109), (191, 0.864155650138855), (223, 0.8666892051696777), (255, 0.866693913936615)]


def test_one_near_repeat_after_a_full_size_move_is_no_stop() -> None:
    assert _stops(_HEALTHY) == []


def test_a_float_exact_repeat_after_a_full_size_move_is_still_a_stop() -> None:
    # requires_grad off / parameters out of the optimizer: no momentum tail, the same weights give the same mean
    evals = _HEALTHY[:-1] + [(255, 0.8666892051696777 * (1 + 3e-7))]
    (f,) = _stops(evals)
    assert f.type == FROZEN_LOSS and f.severity == "warning"


def test_a_near_repeat_that_ends_a_momentum_tail_is_still_a_stop() -> None:
    # the tail collapses 7.7e-3 -> 1.5e-4 -> 2.5e-6 (relative): one near-repeat at the end of it
    v = [1.28, 1.15, 1.04, 0.96, 0.93]
    last = 0.93 * (1 - 7.7e-3)
    tail = [last, last * (1 - 1.5e-4), last * (1 - 1.5e-4) * (1 - 2.5e-6)]
    evals = [(32 * (i + 1), x) for i, x in enumerate(v + tail)]
    found = _stops(evals)
    assert len(found) == 1 and found[0].type == FROZEN_LOSS and found[0].severity == "warning"


@pytest.mark.parametrize("case", ["lightning_trainer-healthy-s21-file", "lightning_trainer-stall-s21-file"])
def test_the_real_healthy_runs_with_the_near_repeat_have_no_frozen_finding(case: str) -> None:
    c = CASES[case]
    (d,) = [diagnose_run(run) for run in read_any(ROOT / c["file"])]
    assert [f for f in d.findings if f.type == FROZEN_LOSS] == []
