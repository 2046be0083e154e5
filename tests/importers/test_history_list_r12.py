"""The HF Trainer's `log_history` dumped alone as a JSON list (`json.dump(trainer.state.log_history, f, indent=2)`):
read as a Trainer state's history, so its last row (`train_runtime`, .., `train_loss`: the run's average) is the
run's summary, never a training point (wild-logs-5's M5). Before: the general reader took the pretty-printed rows
line by line, the summary's `train_loss` at step 3750 a WARNING loss spike (x2.98, "not recovered")."""

from __future__ import annotations

import json

from stethoscope.importers import read_any
from stethoscope.records import EVAL_LOSS, LOSS
from tests.importers.series import series


def _history() -> list[dict[str, float]]:
    rows: list[dict[str, float]] = []
    for step in range(500, 3751, 500):
        rows.append({"loss": round(0.4 / (step / 500) ** 2, 4), "grad_norm": 0.08, "learning_rate": 1.7e-05,
                     "epoch": step / 1250, "step": step})
        if step % 1250 == 0:
            rows.append({"eval_loss": 0.053, "eval_accuracy": 0.99, "eval_runtime": 14008.4,
                         "epoch": step / 1250, "step": step})
    rows.append({"eval_loss": 0.052, "eval_accuracy": 0.99, "eval_runtime": 14051.5, "epoch": 3.0, "step": 3750})
    rows.append({"train_runtime": 91844.8, "train_samples_per_second": 3.266, "train_steps_per_second": 0.041,
                 "total_flos": 3.1e16, "train_loss": 0.073, "epoch": 3.0, "step": 3750})
    return rows


def test_a_history_list_is_read_as_the_trainers(write) -> None:
    (run,) = read_any(write("log_history.json", json.dumps(_history(), indent=2)))
    loss = series(run, LOSS)
    assert sorted(loss) == list(range(500, 3501, 500))  # no point at 3750: the summary row's train_loss is none
    assert loss[3500] < 0.01
    assert sorted(series(run, EVAL_LOSS)) == [2500, 3750]
    assert run.format == "hf_trainer_state"


def test_a_list_of_other_records_is_not_a_history(write) -> None:
    """A kernel benchmark's timings named log_history.json stay refused by this reader."""
    from stethoscope.importers.hf import HFTrainerStateImporter

    path = write("log_history.json", json.dumps([{"bs": 8, "in": 64, "ms": 6.9}, {"bs": 4, "in": 1024, "ms": 81.1}]))
    assert not HFTrainerStateImporter().sniff(path, path.read_text())
