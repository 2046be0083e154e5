"""A record whose values sit on the lines after its epoch head (wild-logs-4's R1: a Faster R-CNN log printing
`EPOCH 8 of 30` and, after a logger line, `EPOCH loss: 0.39`; AdvGAN's `epoch 1:` then two lines of GAN losses)
was refused as "metrics without a step counter" though a person reads it at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from stethoscope.importers import read_any
from stethoscope.records import LOSS
from tests.importers.series import series

def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


_PREFIX = "2024-05-26 16:{m:02d}:29 - INFO - train_fasterrcnn.py - {n} - "


def _faster_rcnn(epochs: int) -> str:
    out = [_PREFIX.format(m=0, n=30) + "Train config: DATA:", "  height: 416", "  width: 416", "TRAIN:",
           "  epochs: 30", "  lr: 0.01"]
    for e in range(1, epochs + 1):
        out += [_PREFIX.format(m=e, n=65), f"EPOCH {e} of 30", _PREFIX.format(m=e, n=128),
                f"EPOCH loss: {0.54 - e / 100:.15f}", _PREFIX.format(m=e, n=130) + "save_model!!"]
    return "\n".join(out) + "\n"


def test_an_epoch_of_its_total_heads_the_loss_on_a_later_line(tmp_path) -> None:
    (run,) = read_any(_write(tmp_path / "train.log", _faster_rcnn(10)))
    loss = series(run, LOSS)
    assert sorted(loss) == list(range(1, 11))
    assert loss[8] == pytest.approx(0.46)
    assert {p.name for p in run.points} == {LOSS}  # the config's numbers (height: 416, lr: 0.01) are none


def _advgan(epochs: int) -> str:
    out = ["Using device:  cuda", "training image examples:  50000", "Starting training"]
    for e in range(1, epochs + 1):
        out += [f"Start ep num  {e}", f"epoch {e}:", f"loss_D: {0.4 - e / 1000:.3f}, loss_G_fake: {0.3 + e / 1000:.3f},"
                "             ", f"loss_perturb: {6.8 / e:.3f}, loss_adv: {7.3 / e:.3f}, ", ""]
    return "\n".join(out) + "\n"


def test_a_record_on_the_lines_after_its_epoch_head_is_that_epoch(tmp_path) -> None:
    (run,) = read_any(_write(tmp_path / "train_resnet56.md", _advgan(30)))
    got = {name: series(run, name) for name in ("loss_d", "loss_g_fake", "loss_perturb", "loss_adv")}
    assert all(sorted(s) == list(range(1, 31)) for s in got.values()), {k: len(v) for k, v in got.items()}
    assert got["loss_perturb"][4] == pytest.approx(1.7)
    assert got["loss_d"][30] == pytest.approx(0.37)


def test_a_name_printed_again_after_the_record_is_not_that_epoch(tmp_path) -> None:
    """One record an epoch: a loss line after the record that prints its names again (a test pass printed
    without its word) is no second value of the epoch."""
    text = "".join(f"epoch {e}:\nloss_D: {0.4 - e / 100:.3f}, loss_G: 0.3\nloss_D: 9.000, loss_G: 9.0\n"
                   for e in range(1, 6))
    (run,) = read_any(_write(tmp_path / "gan.log", text))
    assert series(run, "loss_d") == {e: pytest.approx(0.4 - e / 100) for e in range(1, 6)}
