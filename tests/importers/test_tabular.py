from __future__ import annotations

import math
from pathlib import Path

from stethoscope.importers.tabular import CSVImporter, JSONLImporter
from stethoscope.records import EVAL_LOSS, GRAD_NORM, LOSS, LOSS_SCALE, LR, TOKENS_PER_S
from tests.importers.series import names, series

WANDB = """_step,_runtime,_timestamp,train/loss,eval/loss,train/learning_rate,notes
0,1.5,1700000000.25,2.5,,0.001,warmup
1,3.0,1700000001.5,2.25,,0.001,
2,4.5,1700000002.75,NaN,3.0,0.002,
"""


def test_wandb_history_export(write) -> None:
    run = CSVImporter().read(write("history.csv", WANDB))
    assert run.format == "csv" and run.meta["dialect"] == "wandb"
    loss = series(run, LOSS)
    assert loss[0] == 2.5 and loss[1] == 2.25 and math.isnan(loss[2])
    assert series(run, EVAL_LOSS) == {2: 3.0}
    assert series(run, LR) == {0: 0.001, 1: 0.001, 2: 0.002}
    assert series(run, "perf/elapsed_s") == {0: 1.5, 1: 3.0, 2: 4.5}
    assert {p.time for p in run.points if p.step == 1} == {1700000001.5}
    assert "notes" not in names(run)
    assert run.warnings == [f"{run.path}:2: notes value 'warmup' is not a number; left out"]


def test_wandb_panel_export_drops_min_max_bands(write) -> None:
    text = "Step,run-1 - train/loss,run-1 - train/loss__MIN,run-1 - train/loss__MAX\n10,2.0,1.9,2.1\n20,1.5,1.4,1.6\n"
    run = CSVImporter().read(write("panel.csv", text))
    assert series(run, LOSS) == {10: 2.0, 20: 1.5}
    assert names(run) == {LOSS}
    assert len(run.meta["skipped_columns"]) == 2


def test_generic_csv_with_iteration_column(write) -> None:
    run = CSVImporter().read(write("log.csv", "iteration,loss,val_acc,grad_norm\n100,2.0,0.5,1.0\n200,1.0,0.75,\n"))
    assert series(run, LOSS) == {100: 2.0, 200: 1.0}
    assert series(run, "eval/acc") == {100: 0.5, 200: 0.75}
    assert series(run, GRAD_NORM) == {100: 1.0}
    assert run.meta["dialect"] == "csv"


def test_csv_step_under_the_training_namespace(write) -> None:
    """HF Trainer's W&B history names its step `train/global_step`, Lightning's `trainer/global_step`; a
    `time/step` column is a duration, not the step."""
    hf = CSVImporter().read(write("hf.csv", "train/loss,train/global_step,time/step\n2.0,20,0.5\n1.5,40,0.5\n"))
    assert series(hf, LOSS) == {20: 2.0, 40: 1.5}
    assert "row index" not in hf.meta.get("notes", {}).get("step", "")
    pl = JSONLImporter().read(write("pl.jsonl", '{"Trainer/Global_Step": 7, "loss": 1.0}\n'))
    assert series(pl, LOSS) == {7: 1.0}
    timed = CSVImporter().read(write("timed.csv", "loss,time/step\n2.0,0.5\n1.5,0.5\n"))
    assert series(timed, LOSS) == {0: 2.0, 1: 1.5}


def test_csv_without_step_uses_the_row_index(write) -> None:
    run = CSVImporter().read(write("losses.csv", "loss,lr\n3.0,0.1\n2.0,0.1\n"))
    assert series(run, LOSS) == {0: 3.0, 1: 2.0}
    assert "row index" in run.meta["notes"]["step"]


def test_tsv(write) -> None:
    run = CSVImporter().read(write("log.tsv", "step\tloss\n5\t1.5\n"))
    assert series(run, LOSS) == {5: 1.5}


def test_csv_truncated_row(write) -> None:
    path = write("log.csv", "step,loss,lr\n1,2.0,0.1\n2,1.5,0.1\n3,1.")
    run = CSVImporter().read(path)
    assert series(run, LOSS) == {1: 2.0, 2: 1.5, 3: 1.0}
    assert series(run, LR) == {1: 0.1, 2: 0.1}


def test_csv_sniff(tmp_path: Path) -> None:
    assert CSVImporter().sniff(tmp_path / "a.csv", "step,foo\n1,2\n")
    assert CSVImporter().sniff(tmp_path / "a.csv", "val_loss,epoch\n1,2\n")
    assert not CSVImporter().sniff(tmp_path / "people.csv", "name,age\nann,3\n")
    assert not CSVImporter().sniff(tmp_path / "a.txt", "step,loss\n")


JSONL = """{"step": 0, "loss": 2.5, "lr": 0.001, "timestamp": 1700000000}
{"step": 1, "loss": NaN, "lr": 0.001, "extra": {"grad_norm": 1.5, "tag": "x"}}
not json at all
{"step": 2, "loss": Infinity, "flag": true, "name": "run"}
{"note": "no step here"}
"""


def test_jsonl(write) -> None:
    path = write("metrics.jsonl", JSONL)
    run = JSONLImporter().read(path)
    assert run.format == "jsonl"
    loss = series(run, LOSS)
    assert loss[0] == 2.5 and math.isnan(loss[1]) and loss[2] == math.inf
    assert series(run, "extra/grad_norm") == {1: 1.5}
    assert {p.time for p in run.points if p.step == 0} == {1700000000.0}
    assert "flag" not in names(run) and "name" not in names(run)
    assert run.warnings == [f"{path}:3: not a JSON object; line left out",
                            f"{path}: 1 lines without a step key (_step, step, global_step, iteration, iter, it, "
                            "num_updates, current_steps, bare or under trainer/, train/, training/); left out"]


def test_fairseq_json_lines(write) -> None:
    text = ('{"epoch": 1, "update": 1.001, "loss": "15.683", "ppl": "52246.3", "wps": "0", "num_updates": "1", '
            '"lr": "2.5e-07", "gnorm": "10.484", "loss_scale": "128", "wall": "3"}\n')
    run = JSONLImporter().read(write("log.jsonl", text))
    assert run.meta["dialect"] == "fairseq"
    assert series(run, LOSS) == {1: 15.683}
    assert series(run, GRAD_NORM) == {1: 10.484}
    assert series(run, LOSS_SCALE) == {1: 128.0}
    assert series(run, TOKENS_PER_S) == {1: 0.0}
    assert series(run, "perf/wall_s") == {1: 3.0}


def test_jsonl_sniff(tmp_path: Path) -> None:
    assert JSONLImporter().sniff(tmp_path / "x.jsonl", '{"step": 1, "loss": 2}\n')
    assert JSONLImporter().sniff(tmp_path / "x.log", '{"iter": 1, "loss": NaN}\n')
    assert not JSONLImporter().sniff(tmp_path / "x.json", '{"a": {"b": 1}}')
    assert not JSONLImporter().sniff(tmp_path / "x.log", "iter 1: loss 2.0, time 3ms")


MMENGINE_SCALARS = """{"lr": 0.001, "data_time": 0.0004, "loss": 1.28, "time": 0.0061, "iter": 32, "step": 32}
{"val/loss": 1.25, "data_time": 0.0009, "time": 0.0014, "step": 32}
{"lr": 0.001, "data_time": 0.2081, "loss": 1.27, "time": 0.2103, "iter": 36, "step": 36}
"""


def test_times_on_an_evaluation_row_are_the_evaluations_not_a_training_step(write) -> None:
    # mmengine's scalars.json: the validation record shares the training record's step and writes its own
    # `time` / `data_time`; read as the step's, they overwrote the training step's time after every eval
    run = JSONLImporter().read(write("scalars.json", MMENGINE_SCALARS))
    assert series(run, "time") == {32: 0.0061, 36: 0.2103}
    assert series(run, "perf/data_wait_s") == {32: 0.0004, 36: 0.2081}
    assert series(run, "eval/time") == {32: 0.0014} and series(run, EVAL_LOSS) == {32: 1.25}


def test_two_keys_that_name_one_series_do_not_overwrite_each_other(tmp_path: Path) -> None:
    """`val/train_loss` and `val/loss` both resolve to the eval loss, `train/ce_loss` and `train/total_loss` to the
    train loss: in one row the later key overwrote the earlier one's value (the eval loss read 2.1, the train loss
    measured on the val split). The closest spelling keeps the name; the other keeps its own, in every row."""
    path = tmp_path / "history.jsonl"
    path.write_text('{"_step": 1, "train/loss": 2.0, "val/train_loss": 2.1, "val/loss": 2.5}\n'
                    '{"_step": 2, "train/loss": 1.9, "val/train_loss": 2.0, "val/loss": 2.4}\n'
                    '{"_step": 3, "train/loss": 1.8, "val/train_loss": 1.9}\n')
    run = JSONLImporter().read(path)
    assert series(run, EVAL_LOSS) == {1: 2.5, 2: 2.4}
    assert series(run, "val/train_loss") == {1: 2.1, 2: 2.0, 3: 1.9}
    assert series(run, LOSS) == {1: 2.0, 2: 1.9, 3: 1.8}
    csv_path = tmp_path / "metrics.csv"
    csv_path.write_text("step,train/ce_loss,train/total_loss,val/loss\n1,2.0,2.5,3.0\n2,1.9,2.4,\n")
    run = CSVImporter().read(csv_path)
    assert series(run, LOSS) == {1: 2.5, 2: 2.4}  # the objective, not one of its parts
    assert series(run, "train/ce_loss") == {1: 2.0, 2: 1.9} and series(run, EVAL_LOSS) == {1: 3.0}
