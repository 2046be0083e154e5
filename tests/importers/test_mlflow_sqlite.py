"""MLflow's SQLite tracking store (`mlflow.db`, the default backend since MLflow 3.7), written by the real
MLflow client and read by every command that takes a log."""

from __future__ import annotations

import json
import math
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from stethoscope.importers import read_any
from stethoscope.records import LOSS
from stethoscope.store.query import is_run

mlflow = pytest.importorskip("mlflow")


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "stethoscope.cli.main", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    folder = tmp_path_factory.mktemp("mlflow")
    db = folder / "mlflow.db"
    ids: dict[str, str] = {}
    mlflow.set_tracking_uri(f"sqlite:///{db}")
    try:
        mlflow.set_experiment("tiny-gpt")
        with mlflow.start_run(run_name="overfits") as run:
            ids["overfits"] = run.info.run_id
            for s in range(40):
                train = 3 * math.exp(-s / 10) + 0.5
                mlflow.log_metrics({"train/loss": train,
                                    "val_loss": train + 0.2 + (0.05 * (s - 20) if s > 20 else 0)}, step=s * 10)
        with mlflow.start_run(run_name="blows-up") as run:
            ids["blows-up"] = run.info.run_id
            for s in range(30):
                loss = float("nan") if s == 25 else (float("inf") if s == 26 else 2.0 - 0.01 * s)
                mlflow.log_metric("loss", loss, step=s)
        with mlflow.start_run(run_name="deleted") as run:
            mlflow.log_metric("loss", 1.0, step=0)
        mlflow.delete_run(run.info.run_id)
        with mlflow.start_run(run_name="no-metrics"):
            mlflow.log_param("lr", 0.001)
    finally:
        mlflow.set_tracking_uri("")
    return db, ids


def _series(run, name: str) -> list[tuple[int, float]]:
    cols = run.columns
    return [(s, v) for n, s, v in zip(cols.names, cols.steps, cols.values) if n == name]


def test_every_run_that_logged_a_metric_is_read_in_start_order(store: tuple[Path, dict[str, str]]) -> None:
    db, ids = store
    runs = read_any(db)
    assert [r.meta["run_name"] for r in runs] == ["overfits", "blows-up"]  # the deleted run and the empty one: out
    assert [r.meta["run_id"] for r in runs] == [ids["overfits"], ids["blows-up"]]
    assert runs[0].format == "mlflow_sqlite" and runs[0].meta["experiment"] == "tiny-gpt"
    assert _series(runs[0], LOSS)[:2] == [(0, 3.5), (10, pytest.approx(3 * math.exp(-0.1) + 0.5))]


def test_nan_and_infinity_come_back_as_mlflow_logged_them(store: tuple[Path, dict[str, str]]) -> None:
    # MLflow stores a NaN as 0 with `is_nan` set, and an infinity as the largest float.
    loss = dict(_series(read_any(store[0])[1], LOSS))
    assert math.isnan(loss[25]) and loss[26] == math.inf and loss[24] == pytest.approx(1.76)


def test_diagnose_reads_the_store_and_finds_each_runs_problem(store: tuple[Path, dict[str, str]]) -> None:
    db, _ = store
    assert not is_run(db)  # an SQLite file, but not ours: never opened as a stethoscope store
    done = _cli("diagnose", str(db), "--json")
    assert done.returncode == 0, done.stderr
    found = {Path(r["path"]).name.split("#")[1]: {f["type"] for f in r["findings"]} for r in json.loads(done.stdout)}
    assert "overfitting" in found["overfits"] and "nan" not in found["overfits"]
    assert "nan" in found["blows-up"]


def test_a_folder_holding_mlflow_db_is_searched_and_import_writes_one_store_per_run(
        store: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    db, _ = store
    assert {r.meta["run_name"] for r in read_any(db.parent)} == {"overfits", "blows-up"}
    done = _cli("import", str(db), "--into", str(tmp_path / "runs"))
    assert done.returncode == 0, done.stderr
    stores = sorted(p.name for p in (tmp_path / "runs").iterdir() if is_run(p))
    assert stores == ["00-overfits", "01-blows-up"]  # named by the MLflow run
    shown = _cli("diagnose", str(tmp_path / "runs" / stores[1]), "--json")
    assert shown.returncode == 0 and "nan" in shown.stdout


def test_an_sqlite_file_of_another_tool_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    other = tmp_path / "app.db"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE users (id INTEGER, name TEXT)")
    con.commit()
    con.close()
    done = _cli("diagnose", str(other))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "app.db" in done.stderr and "no known log format" in done.stderr
