"""Misread classes of the twelfth grammar part and of real public logs (readers-17), each as a rule: a record
naming the counters of several components is numbered by the counter of the component whose loss it holds."""

from __future__ import annotations

import pytest

from stethoscope.errors import InputError
from stethoscope.records import LOSS
from tests.importers.series import read_text, series

_GLOG = "I1128 03:01:34.744386 140023579745408 terminal.py:91] "


def _learner(k: int, tag: str = "[Learner] ") -> str:
    return (f"{_GLOG}{tag}Actor Episodes = {4 * k} | Actor Steps = {8017 * k} | Learner Steps = {32 * k} | "
            f"Learner Walltime = {8.4 * k:.3f} | Loss = {1.0 + k / 100:.3f}\n")


def test_the_learner_record_is_numbered_by_the_learners_steps() -> None:
    """Before: the actor's frames (`Actor Steps = 8017`) were the step of the learner's loss."""
    run = read_text("".join(_learner(k) for k in range(1, 9)))
    assert series(run, LOSS) == {32 * k: round(1.0 + k / 100, 3) for k in range(1, 9)}


def test_the_actors_lines_are_no_records_of_the_run() -> None:
    """Before: `[Actor] .. Actor Steps = 9207 | Episode Return = ..` put the actor's values at steps 9207, .."""
    text = []
    for k in range(1, 9):
        text.append(f"iteration={k * 6 + 1} | train_mse {2.0 + k / 10:.4f} | examples/sec 279.5\n")
        if k % 2:
            text.append(f"{_GLOG}[Actor] Actor Episodes = {51 * k} | Actor Steps = {9207 * k} | Episode Length = 1000"
                        f" | Episode Return = 587.500 | Steps Per Second = 1073.900\n")
    run = read_text("".join(text))
    assert set(series(run, LOSS)) == {k * 6 + 1 for k in range(1, 9)}
    assert max(p.step for p in run.points) == 49


def test_several_components_counters_and_no_owner_named_is_refused() -> None:
    """Which counter numbers the loss is not said (no tag, the loss key unowned): no step rather than a wrong one."""
    with pytest.raises(InputError):
        read_text("".join(_learner(k, tag="") for k in range(1, 9)))


def test_the_run_counters_are_no_component() -> None:
    """A guard: `Train Steps`, `Global Steps` are the run's counter, not a component's."""
    run = read_text("".join(f"Train Steps = {10 * k} | lr = 0.001 | loss = {2.0 - k / 10:.2f}\n" for k in range(1, 6)))
    assert series(run, LOSS) == {10 * k: round(2.0 - k / 10, 2) for k in range(1, 6)}
