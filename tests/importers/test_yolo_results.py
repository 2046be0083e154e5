"""YOLOv5 (before v6) and YOLOv7 write `results.txt`: one row an epoch, no header, 15 space-aligned columns. Four
real ones were refused (exit 2, "no known log format"), their runs' `results.csv`/TensorBoard read fine."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from stethoscope.errors import InputError
from stethoscope.importers import read_any
from stethoscope.records import EVAL_LOSS, LOSS
from tests.importers.series import series


def _row(epoch: int, epochs: int) -> str:
    box, obj, cls = 0.1 * math.exp(-epoch / 10) + 0.02, 0.05 * math.exp(-epoch / 20) + 0.01, 0.0
    vals = [box, obj, cls, box + obj + cls, 25, 416, 0.5, 0.4, 0.3 + epoch / 100, 0.1 + epoch / 200,
            box * 1.1, obj * 1.2, 0.0]
    cells = [f"{epoch}/{epochs - 1}", "1.86G"] + [f"{v:.4g}" if isinstance(v, float) else str(v) for v in vals]
    return "".join(f"{c:>10}" for c in cells)


def test_a_headerless_results_txt_is_read_one_step_an_epoch(tmp_path: Path) -> None:
    path = tmp_path / "results.txt"
    path.write_text("\n".join(_row(e, 30) for e in range(30)) + "\n")
    (run,) = read_any(path)
    assert run.format == "yolo_results_txt" and run.meta["epochs"] == 29
    loss, evals = series(run, LOSS), series(run, EVAL_LOSS)
    assert sorted(loss) == list(range(30))
    assert loss[0] == pytest.approx(0.12 + 0.06, rel=1e-3)
    assert evals[5] == pytest.approx((0.1 * math.exp(-0.5) + 0.02) * 1.1 + (0.05 * math.exp(-0.25) + 0.01) * 1.2,
                                     rel=1e-3)
    assert series(run, "eval/mAP50-95")[20] == pytest.approx(0.2)


def test_a_row_of_another_width_is_not_taken_for_one(tmp_path: Path) -> None:
    path = tmp_path / "results.txt"
    path.write_text("\n".join(_row(e, 30) + "  7" for e in range(30)) + "\n")  # 16 columns: not this layout
    try:
        runs = read_any(path)
    except InputError:  # refused, or read by another reader: either way not as a YOLO results table
        return
    assert all(r.format != "yolo_results_txt" for r in runs)
