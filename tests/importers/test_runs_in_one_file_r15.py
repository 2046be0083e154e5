"""Files the wild-logs-6 set misread in the importers (readers-15): runs appended into one file overlaid by step
(M1), a Lightning CSV's per-validation-batch rows laid on the training axis (M2), a progress-only file read as a
run (T1). Synthetic excerpts in the shapes of the real files.

- mmengine's `vis_data/scalars.json` is appended to by each launch into the same work_dir: `"step"` starts over
  at 1 with the untrained loss (42 after 6.5). Before: one run, the restart an ERROR divergence at step 1.
- fastai v1 prints a fresh `epoch train_loss valid_loss accuracy` table from epoch 1 for each `fit`. Before: the
  tables laid over each other on epochs 1..20 (and an overfitting warning built from mixed tables).
- Lightning's `val_loss_step` rows count the val loader's batches (`step` 0, 1, ..): before, they were an eval
  series on the training axis beside the epoch aggregate `val_loss_epoch`, which they drowned.
- LLaMA-Factory's `trainer_log.jsonl` of a predict run holds progress only (`percentage`, `total_steps`):
  before, a run of `percentage` over steps.
"""

from __future__ import annotations

import json

import pytest

from stethoscope.errors import InputError
from stethoscope.importers import read_any
from stethoscope.records import LOSS
from tests.conftest import run_cli
from tests.importers.series import series


def _mmengine_run(steps: range, start: float, end: float) -> list[str]:
    n = len(steps)
    return [json.dumps({"lr": 1e-05, "grad_norm": 20.0 + k, "loss": start + (end - start) * k / max(n - 1, 1),
                        "loss_bbox": 3.0 - k / n, "time": 0.6, "epoch": 1, "iter": s, "memory": 740, "step": s})
            for k, s in enumerate(steps)]


def test_runs_appended_to_an_mmengine_scalars_file_are_split(write) -> None:
    rows = (_mmengine_run(range(1, 3), 42.8, 42.3) + _mmengine_run(range(1, 151), 41.0, 6.5)
            + [json.dumps({"coco/bbox_mAP": 0.0, "coco/bbox_mAP_50": 0.0, "time": 0.2, "step": 0})]
            + _mmengine_run(range(10, 510, 10), 43.3, 8.6))
    runs = read_any(write("vis_data/scalars.json", "\n".join(rows) + "\n"))
    assert [r.meta["run_name"] for r in runs] == ["run 1", "run 2", "run 3"]
    assert "runs one after the other" in runs[0].meta["notes"]["runs"]
    assert len(series(runs[1], LOSS)) == 150 and series(runs[1], LOSS)[150] == pytest.approx(6.5)
    assert series(runs[2], LOSS)[10] == pytest.approx(43.3)  # the third run's start, not a spike of the second


def test_a_resumed_scalars_file_stays_one_run(write) -> None:
    """A resume goes back to a checkpoint's step, not to the beginning, and its loss goes on: one run."""
    rows = _mmengine_run(range(10, 510, 10), 43.0, 9.0) + _mmengine_run(range(410, 1010, 10), 9.5, 6.0)
    (run,) = read_any(write("vis_data/scalars.json", "\n".join(rows) + "\n"))
    assert max(series(run, LOSS)) == 1000


def _fastai_table(epochs: int, start: float) -> str:
    rows = "".join(f"{e:<10}{start / e:<12.6f}{start / e + 0.3:<12.6f}{0.5 + e / 100:.6f}\n" for e in range(1, epochs + 1))
    return f"epoch     train_loss  valid_loss  accuracy\n{rows}Total time: 02:25\n"


def test_fastai_tables_printed_again_from_epoch_one_are_runs(write) -> None:
    text = ("Training lm from: [PosixPath('lm_best')]\n" + _fastai_table(1, 3.4) + _fastai_table(20, 2.7)
            + "Loss and accuracy using (cls_best): [1.3879647, tensor(0.2595)]\n" + _fastai_table(8, 0.7))
    runs = read_any(write("Training qrnn on ML.txt", text))
    assert [len(series(r, LOSS)) for r in runs] == [1, 20, 8]
    assert series(runs[2], LOSS)[1] == pytest.approx(0.7)  # the third fit's epoch 1, not the second's
    assert "printed again" in runs[1].meta["notes"]["runs"]


def test_a_table_printed_again_that_goes_on_counting_is_one_run(write) -> None:
    head = "epoch     train_loss  valid_loss  accuracy\n"
    rows = [f"{e:<10}{3 / e:<12.6f}{3 / e + 0.3:<12.6f}{0.5 + e / 100:.6f}\n" for e in range(1, 13)]
    (run,) = read_any(write("train.txt", head + "".join(rows[:6]) + head + "".join(rows[6:])))
    assert sorted(series(run, LOSS)) == list(range(1, 13))


def _lightning_csv() -> str:
    out = ["epoch,step,train_loss_epoch,train_loss_step,val_loss_epoch,val_loss_step"]
    step = 0
    for epoch in range(8):
        for _ in range(2):
            step += 40
            out.append(f"{epoch},{step},,{2.7 - 0.1 * epoch:.4f},,")
        out += [f",{b},,,,{2.0 + 4 * (b % 3) / 3:.4f}" for b in range(19)]  # the val loader's batches
        out.append(f"{epoch},{step},,,{3.5 + (0.1 * (epoch - 2) if epoch > 2 else -0.1 * epoch):.4f},")
        out.append(f"{epoch},{step},{2.75 - 0.1 * epoch:.4f},,,")
    return "\n".join(out) + "\n"


def test_lightning_per_validation_batch_rows_are_not_an_eval_series(write) -> None:
    (run,) = read_any(write("lightning_logs/version_23/metrics.csv", _lightning_csv()))
    evals = series(run, "eval/loss")
    assert len(evals) == 8 and min(evals) == 80  # one an epoch, at the epoch's training step
    assert evals[640] == pytest.approx(4.0)


def test_lightning_val_step_columns_without_an_epoch_aggregate_are_kept(write) -> None:
    text = "epoch,step,train_loss_step,val_loss_step\n" + "".join(
        f"0,{s},{2.0 - s / 100:.3f},\n0,{s},,{2.2 - s / 100:.3f}\n" for s in range(10, 60, 10))
    (run,) = read_any(write("metrics.csv", text))
    assert len(series(run, "eval/loss")) == 5


def _progress(steps: int, loss: bool) -> str:
    rows = []
    for s in range(5, steps + 1, 5):
        row = {"current_steps": s, "total_steps": 512, "percentage": round(100 * s / 512, 2),
               "elapsed_time": "0:00:05", "remaining_time": "0:08:29"}
        if loss:
            row = {"current_steps": s, "total_steps": 512, "loss": 2.0 - s / 600, "lr": 1e-4, "epoch": s / 256,
                   "percentage": round(100 * s / 512, 2), "elapsed_time": "0:00:05", "remaining_time": "0:08:29"}
        rows.append(json.dumps(row))
    return "\n".join(rows) + "\n"


def test_a_progress_only_trainer_log_is_refused(write, cli_env) -> None:
    path = write("trainer_log.jsonl", _progress(510, loss=False))
    with pytest.raises(InputError, match=r"no training metric \(progress only\): 102 records of percentage"):
        read_any(path)
    out = run_cli("diagnose", str(path), env=cli_env)
    assert out.returncode == 2, out.stdout
    assert "trainer_log.jsonl" in out.stderr and "Traceback" not in out.stderr


def test_progress_keys_beside_a_loss_are_not_stored(write) -> None:
    (run,) = read_any(write("trainer_log.jsonl", _progress(200, loss=True)))
    assert len(series(run, LOSS)) == 40
    assert not {p.name for p in run.points} & {"percentage", "total_steps", "eval/percentage"}
