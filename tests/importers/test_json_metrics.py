"""Metric series dumped as one JSON object (Keras' History, Sacred's metrics.json) and MLflow's file store.

The Keras file is a real `model.fit` History (tests/assets/json_metrics/make_keras_history.py); the MLflow
run is written by the real MLflow client into a file store; Sacred is not installed here, so its
metrics.json is written as Sacred writes it (`{name: {steps, values, timestamps}}`)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from stethoscope.importers.registry import read_any
from stethoscope.records import EVAL_LOSS, LOSS

ASSETS = Path(__file__).parent.parent / "assets" / "json_metrics"


def _series(path: Path, name: str) -> list[tuple[int, float]]:
    c = read_any(path)[0].columns
    return [(s, v) for n, s, v in zip(c.names, c.steps, c.values) if n == name]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "stethoscope.cli.main", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_a_keras_history_dump_is_read_one_step_an_epoch() -> None:
    path = ASSETS / "keras_history.json"
    history = json.loads(path.read_text())
    assert _series(path, LOSS) == list(enumerate(history["loss"]))
    assert _series(path, EVAL_LOSS) == list(enumerate(history["val_loss"]))
    assert read_any(path)[0].format == "json_metrics"


def test_a_pretty_printed_history_in_a_folder_is_found(tmp_path: Path) -> None:
    history = {"loss": [2.0 - e / 20 for e in range(30)], "val_loss": [2.1 - e / 25 for e in range(30)]}
    (tmp_path / "history.json").write_text(json.dumps(history, indent=2))
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 64, "layers": [1, 2]}))
    runs = read_any(tmp_path)
    assert [Path(r.path).name for r in runs] == ["history.json"]
    assert _series(tmp_path / "history.json", LOSS)[-1] == (29, 2.0 - 29 / 20)


def test_sacred_metrics_json_is_read_by_its_steps(tmp_path: Path) -> None:
    steps = list(range(0, 500, 10))
    metrics = {
        "training.loss": {"steps": steps, "values": [3 * math.exp(-s / 200) + 0.5 for s in steps],
                          "timestamps": [f"2024-05-14T10:{s // 60 % 60:02d}:{s % 60:02d}.000000" for s in steps]},
        "validation.loss": {"steps": steps[::5], "values": [3 * math.exp(-s / 200) + 0.6 for s in steps[::5]],
                            "timestamps": [f"2024-05-14T10:{s // 60:02d}:{s % 60:02d}.000000" for s in steps[::5]]},
    }
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps(metrics))
    c = read_any(path)[0].columns
    assert set(c.names) == {LOSS, EVAL_LOSS}
    assert list(c.steps[:3]) == [0, 0, 10]  # rows in step order: both series at step 0, then the loss at 10
    assert _series(path, EVAL_LOSS)[1] == (50, 3 * math.exp(-50 / 200) + 0.6)
    assert c.times[0] is not None and c.times[2] - c.times[0] == 10.0


def test_a_json_object_without_series_is_refused_clearly(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"loss": [], "val_loss": {"best": 1.2}, "score": [0.5, "n/a"]}))
    done = _cli("diagnose", str(path))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert str(path) in done.stderr


def test_an_mlflow_file_store_run_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mlflow = pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps the file store in maintenance mode
    mlflow.set_tracking_uri(f"file:{tmp_path / 'mlruns'}")
    with mlflow.start_run() as run:
        for s in range(40):
            train = 3 * math.exp(-s / 10) + 0.5
            mlflow.log_metrics({"train/loss": train, "val_loss": train + 0.2 + (0.05 * (s - 20) if s > 20 else 0)},
                               step=s * 10)
    mlflow.set_tracking_uri("")
    runs = read_any(tmp_path / "mlruns")
    assert len(runs) == 1 and runs[0].format == "mlflow" and runs[0].meta["run_id"] == run.info.run_id
    folder = tmp_path / "mlruns" / "0" / run.info.run_id
    assert _series(folder / "meta.yaml", LOSS)[:2] == [(0, 3.5), (10, 3 * math.exp(-0.1) + 0.5)]
    done = _cli("diagnose", str(folder), "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    text = json.dumps(found)
    assert "overfitting" in text
