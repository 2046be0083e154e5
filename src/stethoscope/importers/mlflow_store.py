"""A run in MLflow's file store (`mlruns/<experiment>/<run>/`): its `meta.yaml` beside a `metrics/` folder
of one file a metric, each line `timestamp_ms value step` (`timestamp_ms value` before MLflow 1.0: step 0).
A metric logged under a name with `/` (`train/loss`) sits in subfolders. Read it with
`stethoscope diagnose mlruns/0/<run>` (or the whole `mlruns/`: one run each)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stethoscope.errors import InputError
from stethoscope.importers.base import Columns, ImportedRun
from stethoscope.importers.source import read_text
from stethoscope.logtext.names import FileNames, scaled_row
from stethoscope.logtext.table import PointTable, describe, to_float

NAME = "mlflow"
META = "meta.yaml"


class MLflowStoreImporter:
    """One MLflow run folder, found by its `meta.yaml`."""

    name = NAME

    def sniff(self, path: Path, head: str) -> bool:
        return path.name == META and (path.parent / "metrics").is_dir()

    def read(self, path: Path) -> ImportedRun:
        folder = path.parent / "metrics"
        rows: dict[int, dict[str, Any]] = {}
        times: dict[int, float] = {}
        warnings: list[str] = []
        names = FileNames()
        files = sorted(p for p in folder.rglob("*") if p.is_file())
        for file in files:
            name = names(file.relative_to(folder).as_posix()).name
            for number, line in enumerate(read_text(file).splitlines(), 1):
                parts = line.split()
                if not parts:
                    continue
                stamp = to_float(parts[0])
                step = to_float(parts[2]) if len(parts) > 2 else 0.0
                if len(parts) < 2 or stamp is None or step is None or not step.is_integer():
                    warnings.append(f"{file}:{number}: expected 'timestamp value step'; line left out")
                    continue
                rows.setdefault(int(step), {})[name] = parts[1]
                times.setdefault(int(step), stamp / 1000.0)
        if not rows:
            raise InputError(path, f"no metric points in {folder} (expected files of 'timestamp value step' lines)")
        columns, rejected = metric_columns(rows, times, names, str(folder))
        warnings += rejected
        meta = {"dialect": "mlflow_file_store", "run_id": path.parent.name, "metrics": len(files)}
        return ImportedRun(str(path.parent), NAME, None, meta, warnings, columns=columns)


def metric_columns(rows: dict[int, dict[str, Any]], times: dict[int, float], names: FileNames,
                   where: str) -> tuple[Columns, list[str]]:
    """The columns of {step: {name: value}} (both MLflow stores), and a warning for each value left out."""
    table = PointTable()
    for step in sorted(rows):
        table.add_row(step, step, times.get(step), *scaled_row(rows[step], names.scales))
    columns, rejected = table.build_columns()
    return columns, describe(rejected, lambda step: f"{where}: step {step}")
