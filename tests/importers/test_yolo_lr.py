"""Ultralytics' results tables carry the LR of each parameter group (`lr/pg0..2` from YOLOv8 on, `x/lr0..2` in
YOLOv5/v7), numbered from 0: they are the run's LR series (`opt/lr`, then `opt/lr/group1`, `opt/lr/group2`), so a
warm-up that raises the loss is known as the schedule's, and LR findings name the groups."""

from __future__ import annotations

from pathlib import Path

import pytest

from stethoscope.importers import read_any
from stethoscope.logtext.names import metric_name
from stethoscope.records import LR


@pytest.mark.parametrize("columns", [("lr/pg0", "lr/pg1", "lr/pg2"), ("x/lr0", "x/lr1", "x/lr2")])
def test_an_ultralytics_results_table_gives_the_lr_of_each_group(tmp_path: Path, columns: tuple[str, ...]) -> None:
    head = ["epoch", "train/box_loss", "train/cls_loss", "train/dfl_loss", "metrics/mAP50(B)", "val/box_loss",
            "val/cls_loss", "val/dfl_loss", *columns]
    rows = [",".join(f"{h:>20}" for h in head)]
    for e in range(30):
        warm = min(1.0, (e + 1) / 3)
        lrs = (0.01 * warm, 0.01 * warm, 0.1 - (0.1 - 0.01) * warm)  # the bias group warms down to lr0
        values = (e, 1.5 - e * 0.01, 1.2 - e * 0.01, 1.1 - e * 0.005, 0.3 + e * 0.01, 1.6 - e * 0.01, 1.3 - e * 0.01,
                  1.2 - e * 0.005, *lrs)
        rows.append(",".join(f"{v:>20.6g}" for v in values))
    (tmp_path / "results.csv").write_text("\n".join(rows) + "\n")
    run = read_any(tmp_path / "results.csv")[0]
    lr = {p.step: p.value for p in run.points if p.name == LR}
    bias = [p.value for p in run.points if p.name == f"{LR}/group2"]
    assert len(lr) == 30 and lr[max(lr)] == pytest.approx(0.01) and min(lr.values()) == pytest.approx(0.01 / 3, rel=1e-4)
    assert len(bias) == 30 and bias[0] == pytest.approx(0.07, rel=1e-4)
    assert not any(p.name.startswith(("lr/", "x/")) for p in run.points)


def test_only_numbered_groups_are_lrs() -> None:
    assert metric_name("lr/pg1") == f"{LR}/group1" and metric_name("x/lr0") == LR
    assert metric_name("x/lr_decay") != LR and metric_name("lr/pgx") != LR
