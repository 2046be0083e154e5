"""Logs of one record an epoch, and a test split that is the run's only eval.

* A CSV or JSONL without a step column but with an `epoch` that rises on every row is numbered by its
  epochs (the file's own numbers: a finding at "step 4" is the row that says epoch 4), and a JSONL of such
  records (DeiT/MAE's `log.txt`) is read, not refused.
* A test loss logged through the run with no validation loss is the eval loss (the overfitting check
  judges it); a test loss logged once stays the final test's.
* PyTorch's MNIST example prints `Test set: Average loss: ..` after each epoch: that is the eval's loss.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from stethoscope.diagnose.engine import diagnose_run
from stethoscope.importers.registry import read_any
from stethoscope.records import EVAL_LOSS, LOSS


def _series(path: Path, name: str) -> list[tuple[int, float]]:
    c = read_any(path)[0].columns
    return [(s, v) for n, s, v in zip(c.names, c.steps, c.values) if n == name]


def _overfit_curves(epochs: int) -> list[tuple[int, float, float]]:
    """(epoch, train loss, held-out loss): both fall, then the held-out loss turns up from epoch 30."""
    out = []
    for e in range(epochs):
        fall = 6.9 * math.exp(-e / 8)
        out.append((e, fall + 0.5 - 0.004 * e, fall + 0.9 + (0.02 * (e - 30) if e > 30 else 0.0)))
    return out


def test_a_csv_of_one_row_an_epoch_is_numbered_by_its_epochs(tmp_path: Path) -> None:
    path = tmp_path / "history.csv"
    path.write_text("epoch,train_loss,val_loss\n1,2.3,2.4\n2,2.2,2.3\n3,2.1,2.25\n4,2.0,2.2\n")
    assert [s for s, _ in _series(path, LOSS)] == [1, 2, 3, 4]
    assert _series(path, EVAL_LOSS)[-1] == (4, 2.2)
    run = read_any(path)[0]
    assert "epoch" in run.meta["notes"]["step"]


def test_a_csv_whose_epochs_repeat_keeps_the_row_index(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("epoch,loss\n1,2.3\n1,2.2\n2,2.1\n2,2.0\n")
    # the rows in order, numbered from 1 as a console's stepless records are (readers-11: test_epoch_rows_11.py)
    assert [s for s, _ in _series(path, LOSS)] == [1, 2, 3, 4]


def test_a_jsonl_of_epoch_records_is_read_and_its_test_loss_is_the_eval(tmp_path: Path) -> None:
    path = tmp_path / "log.txt"  # DeiT/MAE write this name, one JSON object an epoch
    rows = [{"train_lr": 1e-3, "train_loss": tr, "test_loss": te, "test_acc1": 50.0 + min(e, 60 - e), "epoch": e,
             "n_parameters": 5717416} for e, tr, te in _overfit_curves(60)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert [s for s, _ in _series(path, LOSS)] == list(range(60))
    assert len(_series(path, EVAL_LOSS)) == 60
    findings = [f for f in diagnose_run(read_any(path)[0]).findings if f.severity in ("warning", "error", "critical")]
    over = [f for f in findings if f.type == "overfitting"]
    assert over and abs(over[0].step - 30) <= 2, findings


def test_a_test_loss_logged_once_stays_the_final_test(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    lines = [{"step": s, "loss": 2.0 - s / 100} for s in range(1, 50)] + [{"step": 50, "test_loss": 1.6}]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert _series(path, EVAL_LOSS) == []
    assert _series(path, "test/loss") == [(50, 1.6)]


def test_pytorch_mnist_test_set_average_loss_is_the_eval_loss(tmp_path: Path) -> None:
    lines = []
    for epoch in range(1, 15):
        for batch in range(0, 938, 10):
            loss = 2.3 * math.exp(-(epoch - 1 + batch / 938) * 3) + 0.03 + 0.001 * (batch % 7)
            lines.append(f"Train Epoch: {epoch} [{batch * 64}/60000 ({100.0 * batch / 938:.0f}%)]\tLoss: {loss:.6f}")
        test = 0.05 + (0.004 * (epoch - 6) if epoch > 6 else 0.0) + 0.3 * math.exp(-epoch)
        lines.append(f"\nTest set: Average loss: {test:.4f}, Accuracy: {9800 + epoch}/10000 (98%)\n")
    path = tmp_path / "mnist.log"
    path.write_text("\n".join(lines) + "\n")
    evals = _series(path, EVAL_LOSS)
    assert len(evals) == 14 and evals[0][1] == 0.1604
    findings = diagnose_run(read_any(path)[0]).findings
    assert any(f.type == "overfitting" and f.severity == "warning" for f in findings), findings


def test_a_csv_with_a_fractional_epoch_keeps_the_row_index(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("epoch,loss\n0.5,2.3\n1,2.2\n\n2,2.1\n")
    assert [s for s, _ in _series(path, LOSS)] == [0, 1, 3]


def test_json_lines_with_a_list_field_are_json_lines_not_one_object(tmp_path: Path) -> None:
    # DETR's log.txt: one object an epoch, with the COCO AP list in each (the JSON-object reader claimed it)
    path = tmp_path / "log.txt"
    rows = [{"train_lr": 1e-4, "train_loss": 40.0 - 5 * e, "test_loss": 50.0 - 4 * e,
             "test_coco_eval_bbox": [0.01 * e, 0.02 * e, 0.0, 0.0, 0.0, 0.0], "epoch": e, "n_parameters": 41302368}
            for e in range(4)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = read_any(path)[0]
    assert run.format == "jsonl"
    assert _series(path, LOSS) == [(0, 40.0), (1, 35.0), (2, 30.0), (3, 25.0)]


@pytest.mark.parametrize("name,text", [
    ("training.log", "epoch,loss,val_loss\n0,0.9,1.0\n1,0.8,0.9\n2,0.7,0.85\n3,0.6,0.84\n"),  # Keras' CSVLogger
    ("train.log", "step\tloss\n10\t8.46\n20\t7.69\n30\t7.2\n40\t6.9\n"),
    ("training.log", "epoch,loss,val_loss\r\n0,0.9,1.0\r\n1,0.8,0.9\r\n2,0.7,0.85\r\n3,0.6,0.84\r\n"),  # Windows
])
def test_a_table_is_read_whatever_the_file_is_called(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert read_any(path)[0].format == "csv"
    assert len(_series(path, LOSS)) == 4


def test_a_console_log_with_a_comma_header_is_not_taken_for_a_table(tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    path.write_text("loss,acc\nstep 1 loss 2.3 acc 0.1\nstep 2 loss 2.2 acc 0.2\nstep 3 loss 2.1 acc 0.3\n")
    assert read_any(path)[0].format != "csv"


def test_epoch_records_of_two_runs_appended_are_read_as_a_restart(tmp_path: Path) -> None:
    """The second run starts over from epoch 0 with an untrained loss (41 after 36): two runs, each read on its
    own (readers-15: JSON lines are split as console logs are, never laid over each other by step; this test
    asserted the two runs' epochs one after the other in one run before)."""
    path = tmp_path / "log.txt"
    rows = [{"train_loss": 40.0 - e, "test_loss": 45.0 - e, "epoch": e} for e in range(5)]
    rows += [{"train_loss": 41.0 - e, "test_loss": 46.0 - e, "epoch": e} for e in range(10)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    runs = read_any(path)
    assert [r.meta["run_name"] for r in runs] == ["run 1", "run 2"]
    assert [[s for n, s in zip(r.columns.names, r.columns.steps) if n == LOSS] for r in runs] == [
        list(range(5)), list(range(10))]


@pytest.mark.parametrize("name", ["metrics.csv", "log.csv"])  # Lightning's name (its importer) and any other
def test_a_long_format_table_names_a_val_rows_loss_the_eval_loss(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    rows = ["step,type,loss,cumulative_time_ms,step_avg_ms", "0,val,10.8258,0,0.02"]
    rows += [f"{s},train,{9 - s / 100:.3f},{814 * s},700.0" for s in range(1, 200)]
    rows += ["100,val,5.5037,70412,704.12"]
    path.write_text("\n".join(rows) + "\n")
    assert _series(path, EVAL_LOSS) == [(0, 10.8258), (100, 5.5037)]
    assert len(_series(path, LOSS)) == 199 and not read_any(path)[0].warnings


def test_llama_factory_trainer_log_counts_current_steps(tmp_path: Path) -> None:
    path = tmp_path / "trainer_log.jsonl"  # LLaMA-Factory's LogCallback (it was refused: no step key)
    rows = [{"current_steps": s, "total_steps": 100, "loss": 2.0 - s / 100, "lr": 1e-5, "epoch": s / 50,
             "percentage": s, "elapsed_time": "0:00:10", "remaining_time": "0:10:00"} for s in range(5, 101, 5)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert [s for s, _ in _series(path, LOSS)] == list(range(5, 101, 5))
