"""Overfitting graded by its cost to the run (`OverfitDetector._given_back`).

Marian's healthy transformer: the eval loss fell 159 -> 43.37 and then drifted up to 44.19 (+1.9%) over 9 evals while
its early stopping counted: 0.7% of what it learned given back, the best checkpoint as good as ever. That was a
WARNING overfitting; a person has nothing to do now, so it is info. A rise that gives back more is a warning, and
one that starts small and grows past that is paged when it does."""

from __future__ import annotations

from stethoscope.detect.overfit import OverfitDetector

from .conftest import make_records, of_type, replay

# Marian's eval losses, one every 5000 steps (wild-logs-4), and a train loss that keeps falling
_MARIAN = [159.222, 79.6007, 58.5688, 51.9815, 48.6427, 46.7741, 45.5914, 44.8051, 44.3059, 43.9519, 43.6956,
           43.5462, 43.4367, 43.3574, 43.3567, 43.3691, 43.4036, 43.4385, 43.5121, 43.5929, 43.697, 43.7943,
           43.9223, 44.0605, 44.1934]


def _run(evals: list[float], finish: bool = True) -> list:
    n = 10 * len(evals)
    train = [200.0 / (1 + 0.05 * i) + 40.0 for i in range(n)]
    ev = [evals[i // 10] if i % 10 == 9 else None for i in range(n)]
    return of_type(replay(OverfitDetector(), make_records(range(n), LOSS=train, EVAL_LOSS=ev), finish=finish),
                   "overfitting")


def test_a_plateau_drifting_up_by_a_small_share_of_what_it_learned_is_info() -> None:
    last = _run(_MARIAN)[-1]
    assert last.severity == "info" and 0 < last.evidence["given_back"] <= 0.05, last
    assert last.step == 149 and "small price" in last.message  # the best eval (75000 in Marian's steps)


def test_a_rise_that_gives_back_more_of_the_learning_is_a_warning() -> None:
    steep = _MARIAN[:16] + [43.37 + 0.8 * k for k in range(1, 10)]  # +17% over 9 evals: 6% of the learning
    last = _run(steep)[-1]
    assert last.severity == "warning" and "given_back" not in last.evidence, last


def test_a_rise_that_grows_past_a_small_price_is_paged_when_it_does() -> None:
    growing = _MARIAN + [44.35, 44.5, 44.7, 44.9, 45.1, 45.3, 45.6, 45.9, 46.2]  # past +5% of the best at 45.6
    n = 10 * len(growing)
    det, seen = OverfitDetector(), []  # every version the live detector emits, in order
    for r in make_records(range(n), LOSS=[200.0 / (1 + 0.05 * i) + 40.0 for i in range(n)],
                          EVAL_LOSS=[growing[i // 10] if i % 10 == 9 else None for i in range(n)]):
        seen += [(r.step, f.severity) for f in of_type(det.update(r), "overfitting")]
    assert seen[0][1] == "info" and seen[-1] == (319, "warning"), seen  # 45.6: the eval at step 319
