"""The dashboard's summary (its compare panel) tells the numbers `show` tells of the same run."""

from __future__ import annotations

import json
import math

from stethoscope import Monitor
from stethoscope import records as R
from stethoscope.serve.dashboard import App
from stethoscope import open_run
from stethoscope.store.summary import summarize


def _run(path, nan_from=None):
    with Monitor(path, flush_interval=0.1) as mon:
        for s in range(120):
            loss = float("nan") if nan_from is not None and s >= nan_from else 3.0 * math.exp(-s / 40) + 0.5
            mon.step(s, loss=loss, tokens=64, **{R.LR: 0.1})


def _summary(app, run):
    status, _, body = app.handle("GET", "/api/summary", f"run={run}")
    assert status == 200
    return json.loads(body)["summary"]


def test_a_run_whose_loss_ended_nan_has_last_loss_nan_not_its_last_finite_one(tmp_path):
    _run(tmp_path / "nan", nan_from=80)
    _run(tmp_path / "ok")
    app = App([tmp_path / "nan", tmp_path / "ok"])
    bad, good = _summary(app, "nan"), _summary(app, "ok")
    assert bad["last_loss"] == "nan"  # `show` prints nan; the last finite loss (step 79) is not the run's last loss
    shown = summarize(open_run(tmp_path / "nan"))
    assert shown["last_loss"] is None and bad["min_loss"] == shown["min_loss"]
    assert bad["last_step"] == shown["last_step"] == 119
    ok = summarize(open_run(tmp_path / "ok"))
    assert good["last_loss"] == ok["last_loss"] and good["min_loss"] == ok["min_loss"]
    assert good["tokens_per_s"] == ok["tokens_per_s"] and good["step_time_s"] == ok["step_time_s"]
