from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from stethoscope.errors import InputError
from stethoscope.importers.tensorboard import TensorBoardImporter
from stethoscope.records import EVAL_LOSS, GRAD_NORM, LOSS, LR
from tests.importers.series import names, series

torch = pytest.importorskip("torch")
pytest.importorskip("tensorboard")


def event_file(folder: Path, write_events) -> Path:
    from torch.utils.tensorboard import SummaryWriter

    torch.set_num_threads(1)
    writer = SummaryWriter(str(folder))
    write_events(writer)
    writer.close()
    (path,) = folder.glob("events.out.tfevents.*")
    return path


def test_scalars_of_common_tags(tmp_path: Path) -> None:
    def events(w) -> None:
        for step in range(5):
            w.add_scalar("train/loss", 2.0 - step / 4, step)  # float32-exact values
            w.add_scalar("Loss/val", 3.0 - step / 4, step)
            w.add_scalar("learning_rate", 1e-3 * (step + 1), step)
            w.add_scalar("grad_norm", 0.5, step)
            w.add_scalar("custom/thing", float(step), step)
        w.add_scalar("lm loss vs samples", 2.0, 2048)
        w.add_scalar("loss", float("nan"), 7)
        w.add_histogram("weights", torch.zeros(4), 1)

    run = TensorBoardImporter().read(event_file(tmp_path, events))
    assert run.format == "tensorboard"
    loss = series(run, LOSS)
    assert math.isnan(loss.pop(7))
    assert loss == {0: 2.0, 1: 1.75, 2: 1.5, 3: 1.25, 4: 1.0}
    assert series(run, EVAL_LOSS)[4] == 2.0
    assert series(run, LR)[4] == pytest.approx(5e-3)
    assert series(run, GRAD_NORM) == {s: 0.5 for s in range(5)}
    assert series(run, "custom/thing")[3] == 3.0
    assert "lm loss vs samples" in run.meta["skipped_tags"]
    assert all(p.step != 2048 for p in run.points)
    assert run.meta["non_scalar_tags"] == ["weights"]
    assert all(p.time is not None and p.time > 1e9 for p in run.points)
    assert run.warnings == []


def test_more_than_ten_thousand_points_are_all_read(tmp_path: Path) -> None:
    def events(w) -> None:
        for step in range(12_345):
            w.add_scalar("loss", 1.0 / (step + 1), step)

    run = TensorBoardImporter().read(event_file(tmp_path, events))
    loss = series(run, LOSS)
    assert len(loss) == 12_345 and loss[12_344] == pytest.approx(1 / 12_345)


def test_tensor_scalars_of_the_scalars_plugin(tmp_path: Path) -> None:
    def events(w) -> None:
        for step in range(3):
            w.add_scalar("loss", 1.0 + step, step, new_style=True)

    run = TensorBoardImporter().read(event_file(tmp_path, events))
    assert series(run, LOSS) == {0: 1.0, 1: 2.0, 2: 3.0}


def test_truncated_file_reads_up_to_the_cut(tmp_path: Path) -> None:
    def events(w) -> None:
        for step in range(10):
            w.add_scalar("loss", float(step), step)

    path = event_file(tmp_path / "run", events)
    cut = tmp_path / "events.out.tfevents.cut"
    cut.write_bytes(path.read_bytes()[:-7])
    run = TensorBoardImporter().read(cut)
    assert series(run, LOSS) == {s: float(s) for s in range(9)}
    assert len(run.warnings) == 1 and "truncated or corrupt record" in run.warnings[0]
    assert str(cut) in run.warnings[0]


def test_missing_tensorboard_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "events.out.tfevents.1"
    path.write_bytes(b"\0" * 16)
    for module in [m for m in sys.modules if m == "tensorboard" or m.startswith("tensorboard.")]:
        monkeypatch.setitem(sys.modules, module, None)  # as if it were not installed
    with pytest.raises(InputError, match=r"pip install 'stethoscope\[tensorboard\]'"):
        TensorBoardImporter().read(path)


def test_sniff_by_name(tmp_path: Path) -> None:
    assert TensorBoardImporter().sniff(tmp_path / "events.out.tfevents.123.host.1.0", "\x00\x01")
    assert not TensorBoardImporter().sniff(tmp_path / "train.log", "iter 1: loss 2")


def test_empty_event_file(tmp_path: Path) -> None:
    run = TensorBoardImporter().read(event_file(tmp_path, lambda w: None))
    assert run.points == [] and "loss" not in names(run)


def test_a_loss_and_its_part_keep_apart_the_total_keeping_the_name(tmp_path: Path) -> None:
    # detectron2/Mask2Former write `total_loss` beside its parts `loss_ce`, `loss_mask`: `loss_ce` also names the loss,
    # and written after the total it overwrote it (a healthy run read as an ERROR divergence of its class term)
    def events(w) -> None:
        for step in range(0, 60, 20):
            w.add_scalar("total_loss", 100.0 - step, step)
            w.add_scalar("loss_ce", 0.5 + step / 100, step)
            w.add_scalar("loss_mask", 0.25, step)

    run = TensorBoardImporter().read(event_file(tmp_path, events))
    assert series(run, LOSS) == {0: 100.0, 20: 80.0, 40: 60.0}
    assert series(run, "loss_ce") == {0: 0.5, 20: 0.699999988079071, 40: 0.8999999761581421}
    assert run.meta["tags"]["loss_ce"] == "loss_ce" and run.meta["tags"]["total_loss"] == LOSS
