"""Darknet's detector line (` 1000: 6.745184, 6.957540 avg loss, 0.001000 rate, ..`): the iteration, its loss with no
name before it, then the loss's moving average, which is not the train loss."""

from __future__ import annotations

from stethoscope.records import LOSS
from tests.importers.series import read_text, series


def _darknet(prefix: str) -> str:
    out = []
    for i, step in enumerate(range(1000, 1008)):
        out.append(f"{prefix}Loaded: 0.000057 seconds\n{prefix}\n{prefix} {step}: {7.0 - i / 10:f}, {7.5 - i / 20:f} avg "
                   f"loss, 0.001000 rate, 3.038330 seconds, {step * 64} images, 1.941156 hours left\n")
    return "".join(out)


def test_darknet_iteration_and_loss() -> None:
    for prefix in ("", "<rank 0> "):
        loss = series(read_text(_darknet(prefix)), LOSS)
        assert loss == {1000 + i: 7.0 - i / 10 for i in range(8)}
