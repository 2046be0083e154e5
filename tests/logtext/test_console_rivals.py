"""Two keys of one console line that name the same series: the closest spelling keeps the name.

DETR (torchvision's MetricLogger) prints `loss: 50.0 (51.0)  loss_bbox: 4.7 (4.6)  loss_ce: 2.0 (2.1) ...`:
`loss` and `loss_ce` both read as the train loss, and the later one (the classification term, 2.0 where the
total is 50) overwrote it. Long logs go through the learnt templates and the native scanner, short ones
through the line parser: both are checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from stethoscope.importers.registry import read_any
from stethoscope.records import LOSS


def _detr(lines: int) -> str:
    out = []
    for i in range(lines):
        epoch, it = divmod(i, 13)
        total, ce = 50.0 - 0.01 * i, 2.0 - 0.0004 * i
        out.append(f"Epoch: [{epoch}]  [{it * 10:>3}/128]  eta: 0:02:08  lr: 0.000100  class_error: 100.00  "
                   f"loss: {total:.4f} ({total + 1:.4f})  loss_bbox: 4.7096 (4.6896)  loss_ce: {ce:.4f} ({ce + 0.1:.4f})  "
                   f"loss_giou: 1.7500 (1.7803)  time: 0.6353  data: 0.1017  max mem: 4583")
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("lines", [20, 5000])
def test_the_total_loss_keeps_its_name_beside_a_loss_term(tmp_path: Path, lines: int) -> None:
    path = tmp_path / "detr.log"
    path.write_text(_detr(lines))
    c = read_any(path)[0].columns
    names = list(c.names) if hasattr(c, "names") else None
    loss = [v for n, v in zip(names, c.values) if n == LOSS]
    assert len(loss) == lines and loss[0] == 50.0 and abs(loss[-1] - (50.0 - 0.01 * (lines - 1))) < 1e-3
    ce = [v for n, v in zip(names, c.values) if n == "loss_ce"]
    assert ce[0] == 2.0
