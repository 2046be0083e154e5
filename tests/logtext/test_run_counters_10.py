"""A counter printed with its epoch and a total that turns out to count the whole run (PaddleSeg's `[TRAIN] epoch: 13,
iter: 1000/3250`: 3250 is the run's iterations): a log that starts in a later epoch was read as if each epoch had
3250 iterations (steps 40000.. for 1000..; the ninth grammar part's paddleseg misreads), while a counter within epochs
that starts in a later epoch (word_language_model's tail) keeps counting the epochs before it."""

from __future__ import annotations

import pytest

from stethoscope.records import LOSS
from tests.importers.series import read_text, series
from tests.logtext.test_held_out_eight import _wlm


def _paddleseg(first: int, last: int, every: int, per_epoch: int, total: int, test_at: int | None = None) -> str:
    lines = []
    for step in range(first, last + 1, every):
        lines.append(f"2024-07-24 11:50:00 [INFO]\t[TRAIN] epoch: {(step - 1) // per_epoch + 1}, iter: {step}/{total}, "
                     f"loss: {2 - step / total:.4f}, lr: 0.007182, batch_cost: 0.4438, reader_cost: 0.01230, "
                     f"ips: 18.0262 samples/sec | ETA 00:16:38")
        if test_at is not None and step % test_at == 0:  # another counter's eval, at its own (true) step
            lines.append(f"I0724 11:52:31.001079 25829 solver.cpp:330] Iteration {step}, Testing net (#0)")
            lines.append(f"I0724 11:52:31.001079 25829 solver.cpp:397]     Test net output #1: loss = 3.1 (* 1 = 3.1 loss)")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("per_epoch", [80, 250])
def test_a_run_counter_beside_its_epoch_reads_as_printed_from_a_later_epoch(per_epoch: int) -> None:
    run = read_text(_paddleseg(1000, 2000, 25, per_epoch, 3250))
    loss = series(run, LOSS)
    assert sorted(loss) == list(range(1000, 2001, 25))
    assert loss[1500] == pytest.approx(2 - 1500 / 3250, abs=1e-4)


def test_an_eval_at_its_own_step_does_not_hold_the_run_counter_back() -> None:
    run = read_text(_paddleseg(1000, 1600, 25, 80, 3250, test_at=100))
    assert min(series(run, LOSS)) == 1000


def test_a_counter_within_epochs_from_a_later_epoch_still_counts_the_epochs_before() -> None:
    text, truth = _wlm(200, per_epoch=230, first_epoch=4)  # the count starts over each epoch: within epochs
    assert series(read_text(text), LOSS) == pytest.approx(truth)
