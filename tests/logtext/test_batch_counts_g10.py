"""A `[N/T (P%)]` counter whose counts share no factor counts batches: a sample counter prints batch_idx × batch size."""

from __future__ import annotations

from stethoscope.records import LOSS
from tests.importers.series import read_text, series

_TIMM = ("Train: {e} [{b:>4d}/86 ({p:>3d}%)]  Loss: {v:.2f} ({v:.2f})  Time: 0.227s,  562.78/s  (0.232s,  551.75/s)  "
         "LR: 1.000e-03  Data: 0.008 (0.008)\n")


def test_timm_counts_with_no_common_factor_are_batches() -> None:
    steps = range(1, 200, 15)  # every 15 updates from 1: batch 1, 16 … 76 of epoch 0, then 5, 20 … of epoch 1
    text = "".join(_TIMM.format(e=s // 86, b=s % 86, p=100 * (s % 86) // 85, v=2.0 - s / 1000) for s in steps)
    loss = series(read_text(text), LOSS)
    assert sorted(loss) == list(steps)
    assert loss[91] == 1.91


def test_sample_counts_stay_in_file_order() -> None:
    """PyTorch's MNIST example: `[640/60000 (1%)]`, multiples of the batch size: records numbered in file order."""
    text = "".join(f"Train Epoch: 1 [{i * 640}/60000 ({i}%)]\tLoss: {2.0 - i / 100:.6f}\n" for i in range(1, 9))
    assert sorted(series(read_text(text), LOSS)) == list(range(1, 9))
