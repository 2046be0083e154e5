"""A run replaced in place while the dashboard runs (`demo --force`, a log imported again into the same
folder) gets its own incidents, not the ones cached for the run that was there before (user-trial-4)."""

from __future__ import annotations

import json
import math
import shutil

from click.testing import CliRunner

from stethoscope.cli.main import cli
from stethoscope.serve.dashboard import App


def _log(path, nan_from=None):
    rows = []
    for s in range(120):
        loss = "NaN" if nan_from is not None and s >= nan_from else repr(3.0 * math.exp(-s / 40) + 0.5)
        rows.append(f'{{"step": {s}, "loss": {loss}}}')
    path.write_text("\n".join(rows) + "\n")
    return path


def _types(app):
    status, _, body = app.handle("GET", "/api/events", "run=x")
    assert status == 200, body
    return {f["type"] for f in json.loads(body)["findings"]}


def test_a_run_imported_again_into_the_same_folder_is_diagnosed_again(tmp_path):
    runs = tmp_path / "runs"
    assert CliRunner().invoke(cli, ["import", str(_log(tmp_path / "a.jsonl")), "--into", str(runs / "x")]).exit_code == 0
    app = App([runs / "x"])
    assert "nan" not in _types(app)
    shutil.rmtree(runs / "x")
    res = CliRunner().invoke(cli, ["import", str(_log(tmp_path / "b.jsonl", nan_from=80)), "--into", str(runs / "x")])
    assert res.exit_code == 0, res.output
    assert "nan" in _types(app)
