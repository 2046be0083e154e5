"""`stethoscope export tensorboard|wandb|mlflow` sends the findings every other view shows (the run's incidents,
as `diagnose` and `show` list them): an imported or foreign log sent none (its store holds no detector rows), a
monitored run sent the live detectors' raw rows (11 where `diagnose` said 5)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from stethoscope import Monitor
from stethoscope.cli.main import cli


def _invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def _flat_trainer_state(path):
    rows = [{"epoch": s / 500, "grad_norm": 0.5, "learning_rate": 2e-5, "step": s,
             "loss": round(1.4 + 0.01 * ((s * 7919) % 11 - 5) / 5, 4)} for s in range(5, 505, 5)]
    path.write_text(json.dumps({"global_step": 500, "log_history": rows}))
    return path


def _findings_of(path) -> list[tuple[str, str]]:
    return [(f["type"], f["severity"]) for f in json.loads(_invoke("diagnose", str(path), "--json").stdout)["findings"]]


def test_a_foreign_log_exports_the_findings_diagnose_gives(tmp_path):
    state = _flat_trainer_state(tmp_path / "trainer_state.json")
    assert ("underfitting", "warning") in _findings_of(state)
    res = _invoke("export", "tensorboard", str(state), str(tmp_path / "tb"), "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)[0]["findings"] == len(_findings_of(state))


def test_a_monitored_run_exports_its_incidents_not_the_raw_rows(tmp_path):
    run = tmp_path / "run"
    with Monitor(run, strict=True) as mon:
        for step in range(60):
            mon.step(step, loss=float("nan") if step >= 40 else 3.0 - step / 30)
    res = _invoke("export", "tensorboard", str(run), str(tmp_path / "tb"))
    assert res.exit_code == 0, res.output
    n = len(_findings_of(run))
    assert f"{n} finding{'s' * (n != 1)} →" in res.stdout
