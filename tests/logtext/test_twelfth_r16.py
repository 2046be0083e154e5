"""The twelfth grammar part's classes (readers-16), each as a rule: nanoGPT's eval estimate line beside another
trainer's step records is the eval's, not the step's train record."""

from __future__ import annotations

from stethoscope.records import EVAL_LOSS, LOSS
from tests.importers.series import read_text, series


def _records(steps: range) -> str:
    out = []
    for k, step in enumerate(steps):
        out.append(f"2024-07-24 11:{k:02d}:03.111 | 1|{step}|  xent = {3.0 - k / 10:.4f}  batch_time = 0.406  "
                   f"memory = 30.63GiB  samples/sec = 318.71\n")
        out.append(f"2024-07-24 11:{k:02d}:04.148 | step {step}: train loss {2.5 + k / 10:.4f}, "
                   f"val loss {2.7 + k / 10:.4f}\n")
    return "".join(out)


def test_the_eval_estimate_line_is_no_train_record() -> None:
    """Before: `step 31: train loss 4.2441, val loss ..` was the train loss at 31 (the xent records' lost)."""
    run = read_text(_records(range(1, 200, 30)))
    assert series(run, LOSS) == {s: round(3.0 - k / 10, 4) for k, s in enumerate(range(1, 200, 30))}
    assert series(run, "eval/train_loss")[31] == 2.6
    assert series(run, EVAL_LOSS)[31] == 2.8


def test_the_estimate_beside_records_that_name_the_loss() -> None:
    """Before: both the record's `loss` and the estimate's `train loss` were the train loss at 10."""
    text = "".join(f"Epoch 1 | Step {s} | loss: {3.0 - s / 100:.4f} | lr: 0.0003\n"
                   f"step {s}: train loss {2.0 + s / 100:.4f}, val loss 3.3000\n" for s in range(10, 60, 10))
    run = read_text(text)
    assert series(run, LOSS) == {s: round(3.0 - s / 100, 4) for s in range(10, 60, 10)}
    assert series(run, "eval/train_loss")[20] == 2.2


def test_estimates_alone_are_the_train_loss() -> None:
    """A guard: a log of `train loss .., val loss ..` lines alone keeps them the run's train loss."""
    text = "".join(f"step {s}: train loss {3.0 - s / 100:.4f}, val loss {3.2 - s / 100:.4f}\n" for s in range(0, 60, 10))
    run = read_text(text)
    assert series(run, LOSS)[20] == 2.8
    assert series(run, EVAL_LOSS)[20] == 3.0
