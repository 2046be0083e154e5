"""The `results.txt` of ultralytics YOLOv3/YOLOv5 (before v6) and YOLOv7: one row an epoch, no header, 15 columns
split by spaces:

    epoch/epochs  gpu_mem  box obj cls total  labels  img_size  P R mAP@.5 mAP@.5:.95  val_box val_obj val_cls
         0/299     1.85G  0.1259 0.06233 0.03069 0.2189   25      416    0 0 0.009178 0.002157  0.1183 0.04673 0.0293

The step is the epoch (counted from 0, as printed); `total` is the train loss and the sum of the three val terms
the eval loss; P, R and the two mAPs are the eval's quality metrics. The newer `results.csv` has a header and is
read by the CSV reader."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from stethoscope.errors import InputError
from stethoscope.importers.base import ImportedRun
from stethoscope.importers.mlflow_store import metric_columns
from stethoscope.importers.source import read_text
from stethoscope.logtext.names import FileNames
from stethoscope.records import EVAL_LOSS, LOSS

NAME = "yolo_results_txt"
_ROW = re.compile(r"^\s*(\d+)/(\d+)\s+\d+(?:\.\d+)?[GM]?(?:\s+[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?){13}\s*$")
_TRAIN = ("train/box_loss", "train/obj_loss", "train/cls_loss", LOSS)
_EVAL = ("eval/precision", "eval/recall", "eval/mAP50", "eval/mAP50-95")
_VAL_TERMS = ("eval/box_loss", "eval/obj_loss", "eval/cls_loss")


class YoloResultsImporter:
    """YOLOv5/YOLOv7 `results.txt`: every non-blank line of the file's first bytes is such a row."""

    name = NAME

    def sniff(self, path: Path, head: str) -> bool:
        lines = [ln for ln in head.splitlines()[:-1] or head.splitlines() if ln.strip()][:20]
        return bool(lines) and all(_ROW.match(ln) for ln in lines)

    def read(self, path: Path) -> ImportedRun:
        rows: dict[int, dict[str, Any]] = {}
        warnings: list[str] = []
        total = None
        for number, line in enumerate(read_text(path).splitlines(), 1):
            if not line.strip():
                continue
            m = _ROW.match(line)
            if m is None:
                warnings.append(f"{path}:{number}: expected a YOLO results row (epoch/epochs then 14 numbers); "
                                "line left out")
                continue
            fields = line.split()
            epoch, total = int(m[1]), int(m[2])
            train = dict(zip(_TRAIN, fields[2:6]))
            evals = dict(zip(_EVAL, fields[8:12]))
            terms = dict(zip(_VAL_TERMS, fields[12:15]))
            rows[epoch] = {**train, **evals, **terms, EVAL_LOSS: repr(sum(float(v) for v in terms.values()))}
        if not rows:
            raise InputError(path, "no YOLO results rows (expected 'epoch/epochs gpu_mem box obj cls total ...')")
        columns, rejected = metric_columns(rows, {}, FileNames(), str(path))
        meta = {"dialect": "yolo_results_txt", "epochs": total}
        return ImportedRun(str(path), NAME, None, meta, warnings + rejected, columns=columns)
