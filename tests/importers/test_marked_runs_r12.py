"""Runs in one file that the log itself marks, split even where the loss goes on (wild-logs-5's M1), and a resume
at its last step laid over, not offset (M2). Before: an R XGBoost cross-validation's five folds (`Fold 2` then
`[1] train-auc:..`, AUC only) were laid over each other by round; a 20-epoch run launched after a 50-epoch one
(`Epoch: 0/50, Iteration step: 1300` .. then `Epoch: 0/20, Iteration step: 1300`) overwrote its steps; and a
resume that repeats its last count (`Epoch 4, Global Batch 7095` / `Loaded checkpoint ..` / `Epoch 5, Global Batch
7095`) was read as a new epoch of the same count, every later step shifted by 7095. Synthetic excerpts."""

from __future__ import annotations

from stethoscope.importers import read_any
from stethoscope.records import LOSS
from tests.importers.series import series


def _xgboost_cv(folds: int, rounds: int) -> str:
    out = []
    for k in range(1, folds + 1):
        out.append(f"\n\n\nFold {k}\n\n")
        for r in range(1, rounds + 1):
            train, test = 0.59 + 0.3 * r / rounds, 0.60 + 0.1 * r / rounds + k / 1000
            out.append(f"[{r}]\ttrain-auc:{train:.6f}\ttest-auc:{test:.6f} \n")
            if r == 1:
                out.append("Multiple eval metrics are present. Will use test_auc for early stopping.\n"
                           "Will train until test_auc hasn't improved in 20 rounds.\n\n")
        out.append(f"Stopping. Best iteration:\n[{rounds}]\ttrain-auc:0.89\ttest-auc:0.70\n")
    return "".join(out)


def test_each_fold_of_a_cross_validation_is_a_run(write) -> None:
    """Before: one run of 30 steps, the three folds' rounds overwriting each other."""
    runs = read_any(write("xgboost_logs.txt", _xgboost_cv(3, 30)))
    assert len(runs) == 3
    assert [run.steps for run in runs] == [30, 30, 30]
    assert runs[1].meta["run_name"] == "run 2" and "fold" in runs[1].meta["notes"]["runs"]


def _epochs(total: int, epochs: int, start: float, per_epoch: int = 2) -> list[str]:
    out, step = [], 0
    for e in range(epochs):
        for _ in range(per_epoch):
            step += 1300
            out.append(f"2025-01-06 15:04:15,292 INFO: Epoch: {e}/{total}, Iteration step: {step}, "
                       f"loss: {start - 0.02 * step / 1300:.4f}\n\n")
        out.append(f"2025-01-06 15:13:20,051 INFO: ==============Epoch: {e}/{total},top 1 acc: 0.0{e + 1}==============\n\n")
    return out


def test_a_run_launched_for_another_number_of_epochs_is_a_run(write) -> None:
    """The second run goes on from the first's weights (its loss 4.4, the first ended at 4.6): only the changed
    total marks it. Before: one run, the second's steps 1300..7800 overwriting the first's."""
    text = "".join(_epochs(50, 6, 4.8) + _epochs(20, 3, 4.6))
    runs = read_any(write("train.log", text))
    assert len(runs) == 2
    assert len(series(runs[0], LOSS)) == 12 and len(series(runs[1], LOSS)) == 6
    assert series(runs[1], LOSS)[1300] == 4.58


def test_a_resume_with_the_same_total_stays_one_run(write) -> None:
    """The same total after the counter starts over, the loss going on: a resume from the start, one run."""
    text = "".join(_epochs(50, 6, 4.8) + _epochs(50, 3, 4.6))
    assert len(read_any(write("train.log", text))) == 1


def _t5(resume_at: int) -> str:
    out, epoch = [], 1
    for batch in range(5, resume_at + 1, 5):
        if batch % 100 == 0:
            epoch += 1
        out.append(f"2024-11-08 15:30:53,451 - INFO - Epoch {epoch}, Global Batch {batch}, Training Loss: "
                   f"{3 - batch / 1000:.4f}, Validation Loss: 0.4613, Validation Accuracy: 0.0000\n")
    out.append("2024-11-08 20:58:44,511 - INFO - Loaded checkpoint from checkpoints/checkpoint.pth.\n")
    for batch in range(resume_at, resume_at + 50, 5):
        out.append(f"2024-11-08 21:01:11,306 - INFO - Epoch {epoch + 1}, Global Batch {batch}, Training Loss: "
                   f"{3 - batch / 1000:.4f}, Validation Loss: 0.3924, Validation Accuracy: 0.0000\n")
    return "".join(out)


def test_a_resume_at_its_last_step_is_laid_over(write) -> None:
    """Before: the steps after the resume read at 395 + 395 .. (the count repeated read as a new epoch's)."""
    (run,) = read_any(write("training.log", _t5(395)))
    loss = series(run, LOSS)
    assert max(loss) == 440 and len(loss) == 88
    assert loss[395] == 3 - 0.395
