"""Runs in MLflow's SQLite tracking store (`mlflow.db`, MLflow's default backend since 3.7): one run per
MLflow run that logged a metric, in start order; deleted runs are left out. A point's `is_nan` flag is
its NaN (MLflow stores the value as 0), and +-1.797e308 is how MLflow stores an infinite value.

    stethoscope diagnose mlflow.db          # every run in it
    stethoscope import mlflow.db --into runs/from-mlflow

The file is opened read-only (a live MLflow server may be writing to it)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from stethoscope.errors import InputError
from stethoscope.importers.base import ImportedRun
from stethoscope.importers.mlflow_store import metric_columns
from stethoscope.logtext.names import FileNames

NAME = "mlflow_sqlite"
MAGIC = "SQLite format 3"
_MAX = 1.7976931348623157e308  # sys.float_info.max: MLflow's stand-in for an infinite value
_NEEDS = {"runs", "metrics", "experiments"}


def _connect(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


def is_mlflow_db(path: Path) -> bool:
    """An SQLite file holding MLflow's tracking tables (never a stethoscope store: it has no `runs` table)."""
    try:
        with open(path, "rb") as f:
            if f.read(len(MAGIC)) != MAGIC.encode():
                return False
        con = _connect(path)
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            return _NEEDS <= tables and "run_uuid" in {r[1] for r in con.execute("PRAGMA table_info(metrics)")}
        finally:
            con.close()
    except (OSError, sqlite3.Error):
        return False


class MLflowSQLiteImporter:
    """MLflow's SQLite tracking store: every run in it (`read_runs`), or the newest (`read`)."""

    name = NAME

    def sniff(self, path: Path, head: str) -> bool:
        return head.startswith(MAGIC) and is_mlflow_db(path)

    def read(self, path: Path) -> ImportedRun:
        return self.read_runs(path)[-1]

    def read_runs(self, path: Path) -> list[ImportedRun]:
        try:
            con = _connect(path)
            try:
                return _runs(path, con)
            finally:
                con.close()
        except sqlite3.Error as exc:
            raise InputError(path, f"cannot read the MLflow tracking store ({exc})") from None


def _runs(path: Path, con: sqlite3.Connection) -> list[ImportedRun]:
    experiments = dict(con.execute("SELECT experiment_id, name FROM experiments"))
    listed = con.execute("SELECT run_uuid, name, experiment_id, status FROM runs "
                         "WHERE lifecycle_stage != 'deleted' ORDER BY start_time, run_uuid").fetchall()
    out: list[ImportedRun] = []
    for run_id, run_name, experiment, status in listed:
        points = con.execute("SELECT key, value, timestamp, step, is_nan FROM metrics WHERE run_uuid = ? "
                             "ORDER BY step, timestamp", (run_id,)).fetchall()
        if not points:
            continue
        rows: dict[int, dict[str, Any]] = {}
        times: dict[int, float] = {}
        names = FileNames()
        for key, value, stamp, step, is_nan in points:
            if is_nan:
                value = float("nan")
            elif abs(value) >= _MAX:
                value = float("inf") if value > 0 else float("-inf")
            rows.setdefault(int(step), {})[names(key).name] = value
            times.setdefault(int(step), stamp / 1000.0)
        where = f"{path} run {run_name or run_id}"
        columns, warnings = metric_columns(rows, times, names, where)
        meta = {"dialect": "mlflow_sqlite", "run_id": run_id, "run_name": run_name, "status": status,
                "experiment": experiments.get(experiment, str(experiment))}
        label = f"{path}#{run_name or run_id}"
        out.append(ImportedRun(label, NAME, None, meta, warnings, columns=columns))
    if not out:
        raise InputError(path, f"no metric points in this MLflow tracking store ({len(listed)} runs, "
                               "none with a logged metric)")
    return out
