"""Lightning prints `global_step` as a float (`global_step=1100.0`): the general reader reads its step there."""

from __future__ import annotations

import pytest

from stethoscope.importers.console import ConsoleImporter
from stethoscope.records import LOSS


def _line(step: int, loss: float) -> str:  # NeMo's bar behind honcho's prefix and a syslog-like head
    b = step % 437 + 1
    return (f"trainer-1  | Wed, 24 Jul 2024 11:50:00 +0000 gpu-node1 __main__[12345] INFO Epoch 2:  29%|██        | "
            f"{b}/437 [00:29<01:11, 4.32it/s, loss={loss + 0.05:.3g}, v_num=, reduced_train_loss={loss:.3f}, "
            f"global_step={float(step)}, consumed_samples={float((step + 1) * 256):.3g}]")


def test_a_float_global_step_is_the_step(tmp_path) -> None:
    losses = {step: 1.0 + step % 700 / 1000 for step in range(1000, 2400, 100)}
    path = tmp_path / "train.log"
    path.write_text("".join(_line(s, v) + "\n" for s, v in losses.items()))
    run = ConsoleImporter().read(path)
    got = {p.step: p.value for p in run.points if p.name == LOSS}
    assert sorted(got) == sorted(losses)  # 1000, 1100, ..: not the records' order in the file (1, 2, 3 ..)
    assert got[1500] == pytest.approx(losses[1500], abs=0.06)  # (`loss=` is Lightning's running mean, near it)
