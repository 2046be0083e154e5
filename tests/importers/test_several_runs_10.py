"""Several runs written one after the other into one file are several runs (wild-logs-4's M1: a notebook's Keras
console with five `model.fit` calls read as 3 steps; a sweep's long-format table of 99 runs read as one, its second
run's start a WARNING loss spike), while a resume and a counter that starts over each epoch stay one run."""

from __future__ import annotations

import math

import pytest

from stethoscope.diagnose.engine import diagnose_run
from stethoscope.importers import read_any
from stethoscope.records import LOSS
from tests.importers.series import series

_SUMMARY = """Model: "sequential{k}"
_________________________________________________________________
 Layer (type)                Output Shape              Param #
=================================================================
 dense (Dense)               (None, 44)                3344
=================================================================
Total params: 3,344
_________________________________________________________________
"""


def _fit(k: int, epochs: int, batches: int, start: float) -> str:
    """One `model.fit(verbose=2)`: `Epoch e/N`, then the epoch's one line (its bar's last count only)."""
    out = [_SUMMARY.format(k=f"_{k}" if k else "")]
    for e in range(1, epochs + 1):
        loss = start * math.exp(-e / 15) + 0.1
        out.append(f"Epoch {e}/{epochs}\n{batches}/{batches} - 0s - loss: {loss:.4f} - accuracy: {1 - loss / start:.4f}"
                   f" - 355ms/epoch - 3ms/step\n")
    return "".join(out) + "\ngenerated text: ukraine war russia support\n\n"


def test_a_keras_epoch_line_under_its_head_is_that_epoch(write) -> None:
    """Read before as one step (128, the bar's count on every line): 40 epochs' points on one step."""
    (run,) = read_any(write("train.txt", _fit(0, 40, 128, 3.0)))
    loss = series(run, LOSS)
    assert sorted(loss) == [128 * e for e in range(1, 41)]  # epoch e's last batch
    assert loss[128] == pytest.approx(3.0 * math.exp(-1 / 15) + 0.1, abs=1e-4)


def test_each_fit_of_a_notebook_console_is_a_run_of_its_own(write) -> None:
    text = _fit(0, 60, 128, 3.0) + _fit(1, 80, 7, 5.1) + _fit(2, 30, 4, 5.9)
    runs = read_any(write("README.txt", text))
    assert [r.meta.get("run_name") for r in runs] == ["run 1", "run 2", "run 3"]
    assert [len(series(r, LOSS)) for r in runs] == [60, 80, 30]
    assert min(series(runs[1], LOSS)) == 7 and max(series(runs[1], LOSS)) == 7 * 80
    for run in runs:  # each run's start is no spike: the loss of an untrained model
        assert not [f for f in diagnose_run(run).findings if f.severity in ("warning", "error", "critical")]


def test_a_resume_and_an_epochs_restarting_counter_stay_one_run(write) -> None:
    """A resume goes back to a checkpoint, not to zero; a counter that restarts each epoch (unrecognised as such)
    goes on with the loss where it was: neither starts an untrained run."""
    resumed = [(s, 3.0 - s / 100) for s in range(10, 310, 10)] + [(s, 3.0 - s / 100) for s in range(210, 410, 10)]
    text = "".join(f"step {s} | loss {v:.4f}\n" for s, v in resumed)
    (run,) = read_any(write("resumed.log", text))
    assert run.meta["resumes"] == 1
    epochs = "".join(f"iter {i * 10} | loss {3.0 - (e * 20 + i) / 50:.4f}\n" for e in range(3) for i in range(1, 21))
    (run,) = read_any(write("epochs.log", epochs))
    assert "run_name" not in run.meta


def _sweep(rows_per_run: int, optimizers: list[str], lrs: list[str]) -> str:
    out = ["Epoch,Train_Time,Loss_mean_Dev,Loss_mean_Train,Accuracy_mean_Train,Optimizer,Learning_Rate"]
    for opt in optimizers:
        for lr in lrs:
            for e in (1, 3, 6, 9, 12, 15, 18, 20)[:rows_per_run]:
                loss = 2.3 * math.exp(-e / (4 if opt == "Adam" else 400))
                out.append(f"{e},{e * 0.3:.3f},{loss + 0.01:.4f},{loss:.4f},{1 - loss / 2.3:.3f},{opt},{lr}")
    return "\n".join(out) + "\n"


def test_each_run_of_a_long_format_sweep_table_is_a_run_named_by_its_columns(write) -> None:
    runs = read_any(write("summary.csv", _sweep(8, ["ASGD", "Adam", "SGD"], ["0.0001", "0.01"])))
    assert [r.meta["run_name"] for r in runs][:3] == ["Optimizer=ASGD, Learning_Rate=0.0001",
                                                       "Optimizer=ASGD, Learning_Rate=0.01",
                                                       "Optimizer=Adam, Learning_Rate=0.0001"]
    assert len(runs) == 6 and all(sorted(series(r, LOSS)) == [1, 3, 6, 9, 12, 15, 18, 20] for r in runs)
    spikes = [f for r in runs for f in diagnose_run(r).findings if f.type == "loss_spike"]
    assert not spikes  # merged, the ASGD run after an Adam run read as a loss spike at its step 1


def test_a_table_that_starts_over_with_no_column_naming_its_runs_stays_one_run(write) -> None:
    text = "epoch,loss\n" + "".join(f"{e},{2 - e / 10:.3f}\n" for e in range(1, 9)) + \
        "".join(f"{e},{1.2 - e / 20:.3f}\n" for e in range(1, 9))
    (run,) = read_any(write("metrics.csv", text))
    assert "run_name" not in run.meta
