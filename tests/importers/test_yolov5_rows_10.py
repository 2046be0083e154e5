"""A YOLOv5 console saved from a notebook: its tqdm bar lost its blocks (`640: 100% 15/15 [00:12<00:00, 1.22it/s]`),
so the rows were no table rows, and the general reader read `10.2G 0.1095` as a metric `g` (wild-logs-4's M2):
333 epochs, no train loss."""

from __future__ import annotations

import pytest

from stethoscope.importers import read_any
from stethoscope.records import LOSS
from tests.importers.series import names, series

_HEAD = "      Epoch    GPU_mem   box_loss   obj_loss   cls_loss  Instances       Size"
_EVAL = ("                 Class     Images  Instances          P          R      mAP50   mAP50-95: 100% 1/1 "
         "[00:02<00:00,  2.45s/it]\n                   all         51         87     0.0027      0.469     0.0237    0.00587")


def _log(epochs: int) -> str:
    out = ["## Output", "", "<details>", "  ``` " + _HEAD.strip()]
    for e in range(epochs):
        if e:
            out += ["", _HEAD]
        box, obj, cls = 0.11 - e / 1000, 0.033 - e / 10000, 0.042 - e / 10000
        out += [f"{e:>7d}/499      10.2G {box:>10.4g} {obj:>10.4g} {cls:>10.4g} {26 + e % 5:>10d}        640: 100% "
                f"15/15 [00:12<00:00,  1.22it/s]", _EVAL]
    return "\n".join(out + ["  ```", "</details>"]) + "\n"


def test_rows_whose_bar_lost_its_blocks_are_rows_and_their_loss_parts_the_loss(write) -> None:
    (run,) = read_any(write("README.md", _log(40)))
    loss = series(run, LOSS)
    assert sorted(loss) == list(range(40))
    assert loss[0] == pytest.approx(0.11 + 0.033 + 0.042)  # box + obj + cls: what YOLOv5 optimises
    assert series(run, "box_loss")[39] == pytest.approx(0.071)
    assert "g" not in names(run)
