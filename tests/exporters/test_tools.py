"""TensorBoard, W&B and MLflow, fed live from the Monitor and from a stored run, read back with each
tool's own reader and compared value by value with the store."""

from __future__ import annotations

import json
import math

import pytest

from tests.exporters.conftest import STEPS, cli, record, same, store_series

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


# -- TensorBoard -------------------------------------------------------------------------------
def _tensorboard(logdir) -> tuple[dict[str, dict[int, float]], list[str]]:
    ea_mod = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    acc = ea_mod.EventAccumulator(str(logdir), size_guidance={"scalars": 0, "tensors": 0})  # 0: keep every point
    acc.Reload()
    scalars = {tag: {e.step: e.value for e in acc.Scalars(tag)} for tag in acc.Tags()["scalars"]}
    texts = [t.tensor_proto.string_val[0].decode() for tag in acc.Tags()["tensors"] for t in acc.Tensors(tag)]
    return scalars, texts


def _compare(got: dict[str, dict[int, float]], want: dict[str, dict[int, float]], rel: float) -> None:
    assert set(got) == set(want)
    for name, values in want.items():
        assert set(got[name]) == set(values), name
        assert all(same(got[name][s], v, rel) for s, v in values.items()), name


def test_tensorboard_live(tmp_path):
    record(tmp_path / "exp1", export=["tensorboard"]).close()
    scalars, texts = _tensorboard(tmp_path / "exp1" / "tensorboard")
    want = store_series(tmp_path / "exp1")
    _compare(scalars, want, rel=1e-6)  # event files hold float32
    assert len(scalars["train/loss"]) == STEPS and math.isnan(scalars["train/loss"][STEPS - 1])
    assert any("critical" in t and "nan" in t for t in texts)


def test_tensorboard_export_of_a_stored_run(recorded, tmp_path):
    res = cli("export", "tensorboard", str(recorded), str(tmp_path / "tb"), "--json")
    assert res.exit_code == 0, res.stderr
    rows = json.loads(res.stdout)
    assert [r["rank"] for r in rows] == [0, 1] and all(r["findings"] >= 1 for r in rows)
    for rank in (0, 1):
        scalars, texts = _tensorboard(tmp_path / "tb" / f"rank-{rank}")
        _compare(scalars, store_series(recorded, rank), rel=1e-6)
        assert texts
    res = cli("export", "tensorboard", str(recorded), "--rank", "7")
    assert res.exit_code == 2 and "no rank 7" in res.stderr and res.stderr.count("\n") == 1


def test_tensorboard_export_of_a_foreign_log(tmp_path):
    state = {"log_history": [{"step": s, "loss": 3.0 - 0.1 * s, "learning_rate": 1e-4, "epoch": s / 10}
                             for s in range(1, 11)], "global_step": 10}
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "trainer_state.json").write_text(json.dumps(state))
    res = cli("export", "tensorboard", str(tmp_path / "hf" / "trainer_state.json"), str(tmp_path / "tb"))
    assert res.exit_code == 0, res.stderr
    scalars, _ = _tensorboard(tmp_path / "tb")
    assert scalars["train/loss"] == {s: pytest.approx(3.0 - 0.1 * s) for s in range(1, 11)}


# -- MLflow ------------------------------------------------------------------------------------
@pytest.fixture
def mlflow_env(monkeypatch) -> None:
    pytest.importorskip("mlflow")
    for key, value in (("MLFLOW_ALLOW_FILE_STORE", "true"), ("MLFLOW_DISABLE_TELEMETRY", "true"), ("DO_NOT_TRACK", "1")):
        monkeypatch.setenv(key, value)


def _mlflow(uri: str, run_name: str) -> tuple[dict[str, dict[int, float]], object, object]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("stethoscope")
    (run,) = [r for r in client.search_runs([exp.experiment_id]) if r.info.run_name == run_name]
    metrics = {key: {m.step: m.value for m in client.get_metric_history(run.info.run_id, key)}
               for key in run.data.metrics}
    return metrics, run, client


def test_mlflow_live(tmp_path, mlflow_env):
    from stethoscope.exporters.mlflow import MLflow

    uri = (tmp_path / "mlruns").as_uri()
    record(tmp_path / "exp1", export=[MLflow(tracking_uri=uri)], config={"lr": 1e-3, "model": {"layers": 2}}).close()
    metrics, run, client = _mlflow(uri, "exp1")
    _compare(metrics, store_series(tmp_path / "exp1"), rel=1e-12)
    assert run.info.status == "FINISHED"
    assert run.data.params["lr"] == "0.001" and run.data.params["model.layers"] == "2"
    findings_file = client.download_artifacts(run.info.run_id, "stethoscope/findings.json", str(tmp_path))
    findings = json.loads(open(findings_file).read())
    assert any(f["type"] == "nan" and f["severity"] == "critical" for f in findings)


def test_mlflow_export_of_a_stored_run(recorded, tmp_path, mlflow_env):
    res = cli("export", "mlflow", str(recorded), str(tmp_path / "mlruns"), "--rank", "1")
    assert res.exit_code == 0, res.output
    metrics, run, _ = _mlflow((tmp_path / "mlruns").as_uri(), "exp1/rank-1")
    _compare(metrics, store_series(recorded, 1), rel=1e-12)
    assert run.data.tags["stethoscope.rank"] == "1"


@pytest.mark.slow  # MLflow creates and migrates its schema: ~13 s
def test_mlflow_export_into_sqlite(recorded, tmp_path, mlflow_env, monkeypatch):
    pytest.importorskip("sqlalchemy")
    pytest.importorskip("alembic")
    monkeypatch.chdir(tmp_path)  # a sqlite store keeps artifacts in ./mlruns (MLflow's default artifact root)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    res = cli("export", "mlflow", str(recorded), uri, "--rank", "0", "--experiment", "stethoscope")
    assert res.exit_code == 0, res.output
    metrics, _, _ = _mlflow(uri, "exp1/rank-0")
    _compare(metrics, store_series(recorded, 0), rel=1e-12)  # NaN included: MLflow's sqlite store keeps it


# -- W&B ---------------------------------------------------------------------------------------
@pytest.fixture
def wandb_env(tmp_path, monkeypatch) -> None:
    pytest.importorskip("wandb")
    env = {"WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path / "wandb-home"), "WANDB_SILENT": "true",
           "WANDB_CONFIG_DIR": str(tmp_path / "wandb-config"), "WANDB_CACHE_DIR": str(tmp_path / "wandb-cache")}
    for key, value in env.items():
        monkeypatch.setenv(key, value)


def _wandb_file(root):
    """The offline run file, once W&B's service process has written its history to it: `finish()` can
    return while wandb-core still flushes (seen on a loaded machine), so wait for the rows, bounded."""
    import time

    from tests.exporters import wandb_log

    (path,) = root.glob("wandb/offline-run-*/run-*.wandb")
    deadline = time.monotonic() + 60
    while not wandb_log.rows(path) and time.monotonic() < deadline:
        time.sleep(0.2)
    return path


def test_wandb_live_offline(tmp_path, wandb_env):
    from tests.exporters import wandb_log

    record(tmp_path / "exp1", export=["wandb"], config={"lr": 1e-3}).close()
    path = _wandb_file(tmp_path / "wandb-home")  # W&B's own WANDB_DIR is where its files go
    assert not list((tmp_path / "exp1").glob("wandb"))
    history = wandb_log.history(path)
    want = store_series(tmp_path / "exp1")
    table = {k: history.pop(k) for k in list(history) if k.startswith("stethoscope/findings/")}
    assert max(table["stethoscope/findings/nrows"].values()) >= 1  # the findings, as a W&B table
    _compare(history, want, rel=1e-9)
    assert len(history["train/loss"]) == STEPS and math.isnan(history["train/loss"][STEPS - 1])
    assert wandb_log.config(path)["lr"] == 1e-3
    assert (path.parent / "files").is_dir()


def test_wandb_files_go_to_the_run_dir_without_wandb_dir(tmp_path, wandb_env, monkeypatch):
    monkeypatch.delenv("WANDB_DIR")
    record(tmp_path / "exp1", export=["wandb"]).close()
    assert _wandb_file(tmp_path / "exp1").is_file()


def test_wandb_export_of_a_stored_run(recorded, tmp_path, wandb_env):
    from tests.exporters import wandb_log

    res = cli("export", "wandb", str(recorded), str(tmp_path / "wb"), "--rank", "0", "--json")
    assert res.exit_code == 0, res.output
    (row,) = json.loads(res.stdout)
    path = _wandb_file(tmp_path / "wb")
    assert str(path.parent) == row["to"]
    history = wandb_log.history(path)
    _compare({k: v for k, v in history.items() if not k.startswith("stethoscope/findings/")},
             store_series(recorded, 0), rel=1e-9)


def test_wandb_keeps_steps_that_go_back(tmp_path, wandb_env):
    """A rollback sends the step back: the rows after it are logged, not dropped, against the training step
    (`stethoscope/step`), while W&B's own `_step` keeps counting."""
    from stethoscope.exporters.base import ExportContext
    from stethoscope.exporters.wandb import STEP_KEY, WandB
    from tests.exporters import wandb_log

    exporter = WandB(dir=tmp_path / "wb")
    exporter.open(ExportContext("exp1", tmp_path / "exp1"))
    steps = [1, 2, 3, 4, 5, 3, 4, 5, 6]  # a rollback to step 3 after step 5
    exporter.write([("train/loss", s, 3.0 - i / 10, None) for i, s in enumerate(steps)], [])
    exporter.close()
    logged = [r for r in wandb_log.rows(_wandb_file(tmp_path / "wb")) if "train/loss" in r]
    assert [r[STEP_KEY] for r in logged] == steps
    assert [r["train/loss"] for r in logged] == pytest.approx([3.0 - i / 10 for i in range(len(steps))])
    assert [r["_step"] for r in logged] == sorted(r["_step"] for r in logged)  # W&B's own step never goes back


def test_missing_tool_is_one_line_naming_the_extra(tmp_path, monkeypatch):
    import sys

    import stethoscope as st

    monkeypatch.setitem(sys.modules, "wandb", None)
    with pytest.raises(ImportError, match=r"pip install 'stethoscope\[wandb\]'"):
        st.Monitor(tmp_path / "exp1", export=["wandb"])
    assert not (tmp_path / "exp1").exists()  # refused before anything was created
    with pytest.raises(ValueError, match="unknown exporter 'tensorbored'"):
        st.Monitor(tmp_path / "exp2", export=["tensorbored"])
    assert not (tmp_path / "exp2").exists()
