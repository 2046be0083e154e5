from __future__ import annotations

from pathlib import Path

import pytest

from stethoscope.errors import InputError
from stethoscope.importers.lightning import LightningCSVImporter, column_name, read_hparams
from stethoscope.logtext.names import EPOCH
from stethoscope.records import EVAL_LOSS, LOSS, LR
from tests.importers.series import series

METRICS = """epoch,lr-AdamW,step,train_loss_epoch,train_loss_step,val_acc,val_loss
0,0.001,49,,7.5,,
0,,99,,7.25,,
0,,99,,,0.5,6.5
0,,99,7.375,,,
1,0.0005,149,,oops,,
1,,199,,6.0,,
"""


def test_sparse_rows(write) -> None:
    path = write("lightning_logs/version_0/metrics.csv", METRICS)
    run = LightningCSVImporter().read(path)
    assert run.format == "lightning_csv"
    assert series(run, LOSS) == {49: 7.5, 99: 7.25, 199: 6.0}
    assert series(run, "train/loss_epoch") == {99: 7.375}
    assert series(run, EVAL_LOSS) == {99: 6.5}
    assert series(run, "eval/acc") == {99: 0.5}
    assert series(run, LR) == {49: 0.001, 149: 0.0005}
    assert series(run, EPOCH) == {49: 0.0, 99: 0.0, 149: 1.0, 199: 1.0}
    assert [p.step for p in run.points if p.name == EPOCH] == [49, 99, 149, 199]  # once per step
    assert run.warnings == [f"{path}:6: train/loss value 'oops' is not a number; left out"]


def test_hparams_beside_go_to_meta(write) -> None:
    write("v0/hparams.yaml", "lr: 0.0002\nnum_layers: 12\nuse_x: true\nname: 'tiny'\nnested:\n  a: 1\nnone: null\n")
    run = LightningCSVImporter().read(write("v0/metrics.csv", METRICS))
    assert run.meta["hparams"] == {"lr": 0.0002, "num_layers": 12, "use_x": True, "name": "tiny", "none": None}


def test_hparams_absent(tmp_path: Path) -> None:
    assert read_hparams(tmp_path / "hparams.yaml") == {}


@pytest.mark.parametrize("column,name", [
    ("train_loss_step", "train/loss"), ("train_loss_epoch", "train/loss_epoch"), ("train_loss", "train/loss"),
    ("val_loss", "eval/loss"), ("val_loss_epoch", "eval/loss"), ("lr-AdamW", "opt/lr"),
    ("lr-AdamW/pg2", "opt/lr/group1"), ("epoch", "train/epoch"), ("train_perplexity_step", "train/ppl"),
    ("my_metric", "my_metric"),
])
def test_column_names(column: str, name: str) -> None:
    assert column_name(column) == name


def test_header_without_step(write) -> None:
    with pytest.raises(InputError, match="step"):
        LightningCSVImporter().read(write("metrics.csv", "epoch,loss\n0,1.0\n"))


def test_sniff(tmp_path: Path) -> None:
    assert LightningCSVImporter().sniff(tmp_path / "metrics.csv", "epoch,step,train_loss\n0,1,2\n")
    assert not LightningCSVImporter().sniff(tmp_path / "metrics.csv", "a,b\n1,2\n")
    assert not LightningCSVImporter().sniff(tmp_path / "data.csv", "epoch,step\n")
