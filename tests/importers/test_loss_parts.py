"""A loss logged only in parts (YOLOv5/v8's results.csv: box, cls, dfl; no total) is judged by its sum."""

from __future__ import annotations

import math
from pathlib import Path

from stethoscope.diagnose.engine import diagnose_run
from stethoscope.importers.registry import read_any
from stethoscope.records import EVAL_LOSS, LOSS

HEADER = ["epoch", "train/box_loss", "train/cls_loss", "train/dfl_loss", "metrics/precision(B)", "metrics/recall(B)",
          "metrics/mAP50(B)", "metrics/mAP50-95(B)", "val/box_loss", "val/cls_loss", "val/dfl_loss", "lr/pg0",
          "lr/pg1", "lr/pg2"]


def _yolo_results(path: Path, nan_at: int | None = None) -> None:
    """results.csv as Ultralytics writes it: names right-aligned in wide fields, one row an epoch from 1."""
    width = max(len(h) for h in HEADER) + 2
    lines = [",".join(h.rjust(width) for h in HEADER)]
    for e in range(1, 51):
        box, cls, dfl = 1.2 * math.exp(-e / 30) + 0.6, 2.5 * math.exp(-e / 15) + 0.4, 1.3 * math.exp(-e / 40) + 0.9
        cls = float("nan") if e == nan_at else cls
        row = [e, box, cls, dfl, 0.5, 0.4, 0.3, 0.2, box + 0.05, cls + 0.1, dfl + 0.02, 0.01, 0.01, 0.01]
        lines.append(",".join((f"{x:.5g}" if isinstance(x, float) else str(x)).rjust(width) for x in row))
    path.write_text("\n".join(lines) + "\n")


def _series(run, name: str) -> list[tuple[int, float]]:
    c = run.columns
    return [(s, v) for n, s, v in zip(c.names, c.steps, c.values) if n == name]


def test_yolo_results_csv_gets_a_train_and_an_eval_loss(tmp_path: Path) -> None:
    path = tmp_path / "results.csv"
    _yolo_results(path)
    run = read_any(path)[0]
    loss = _series(run, LOSS)
    assert [s for s, _ in loss] == list(range(1, 51))
    box, cls, dfl = 1.2 * math.exp(-1 / 30) + 0.6, 2.5 * math.exp(-1 / 15) + 0.4, 1.3 * math.exp(-1 / 40) + 0.9
    assert abs(loss[0][1] - (float(f"{box:.5g}") + float(f"{cls:.5g}") + float(f"{dfl:.5g}"))) < 1e-9
    assert len(_series(run, EVAL_LOSS)) == 50
    assert "train/box_loss" in run.meta["notes"][LOSS]


def test_a_nan_in_one_part_is_a_nan_of_the_loss(tmp_path: Path) -> None:
    path = tmp_path / "results.csv"
    _yolo_results(path, nan_at=31)
    nan = [f for f in diagnose_run(read_any(path)[0]).findings if f.type == "nan"]
    assert nan and nan[0].step == 31


def test_a_gans_two_players_are_not_summed(tmp_path: Path) -> None:
    path = tmp_path / "gan.csv"
    path.write_text("step,G_loss,D_loss\n" + "".join(f"{s},{1 + s / 100},{0.7 - s / 1000}\n" for s in range(50)))
    assert _series(read_any(path)[0], LOSS) == []


def test_a_long_console_log_of_parts_keeps_its_order(tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    lines = [f"step {s} | box_loss {1 + 1 / s:.4f} | cls_loss {2 + 1 / s:.4f} | lr 1e-3" for s in range(1, 6001)]
    path.write_text("\n".join(lines) + "\n")
    run = read_any(path)[0]
    loss = _series(run, LOSS)
    assert len(loss) == 6000 and loss[0] == (1, 5.0) and loss[-1][0] == 6000
    steps = list(run.columns.steps)
    assert steps == sorted(steps)  # the totals sit beside their parts: no step goes back (no resume)
