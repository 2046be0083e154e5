"""A folder that holds runs rather than being one (what `stethoscope import` writes for a log of several runs, a
`runs/` folder of demo runs) is read the same by every view: `diagnose` and `compare` take each run in it, and the
verbs that show one run (`show`, `query`, `watch`, `report`) name the runs it holds instead of "not a run" or "no
known log". Before: `diagnose runs/` read only a run's exported tensorboard/ event file, and `diagnose` of an
imported several-run log said "no known log found in this directory"."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from stethoscope import Monitor
from stethoscope.cli.main import cli


def _three_runs_log(path):
    """Three runs written one after the other into one console log; the second spikes at step 150."""
    lines = []
    for k, (n, base) in enumerate([(300, 5.0), (200, 5.1), (250, 5.2)]):
        for s in range(10, n + 10, 10):
            loss = 30.0 if (k == 1 and s == 150) else base * math.exp(-s / 100) + 1.0
            lines.append(f"step {s} | loss {loss:.4f} | lr 3.0e-04")
    path.write_text("\n".join(lines) + "\n")
    return path


def _invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.fixture
def imported(tmp_path):
    log = _three_runs_log(tmp_path / "three.log")
    res = _invoke("import", str(log), "--into", str(tmp_path / "runs"))
    assert res.exit_code == 0, res.output
    return log, tmp_path / "runs"


def test_diagnose_of_an_imported_several_run_log_agrees_with_the_log(imported):
    log, folder = imported
    from_log = json.loads(_invoke("diagnose", str(log), "--json").stdout)
    res = _invoke("diagnose", str(folder), "--json")
    assert res.exit_code == 0, res.output
    stored = json.loads(res.stdout)
    assert len(stored) == len(from_log) == 3
    assert [(f["severity"], f["type"], f["step"]) for d in stored for f in d["findings"]] == \
        [(f["severity"], f["type"], f["step"]) for d in from_log for f in d["findings"]]
    assert [d["label"] for d in stored] == [d["label"] for d in from_log]


@pytest.mark.parametrize("verb", ["show", "query", "watch", "report"])
def test_a_view_of_one_run_names_the_runs_the_folder_holds(imported, verb, tmp_path):
    _, folder = imported
    extra = {"query": ["SELECT 1"], "watch": ["--once"], "report": ["-o", str(tmp_path / "r.html")]}.get(verb, [])
    res = _invoke(verb, str(folder), *extra)
    assert res.exit_code == 2
    assert "a folder of 3 runs" in res.stderr and str(folder / "01-run_2") in res.stderr
    assert f"stethoscope {verb} {folder / '00-run_1'}" in res.stderr


def test_report_of_a_several_run_log_says_how_to_report_one(imported):
    log, _ = imported
    res = _invoke("report", str(log))
    assert res.exit_code == 2 and "holds 3 runs" in res.stderr and f"stethoscope import {log} --into" in res.stderr


def test_compare_of_a_folder_of_runs_compares_each(imported, tmp_path):
    _, folder = imported
    res = _invoke("compare", str(folder), "-o", str(tmp_path / "c.html"))
    assert res.exit_code == 0, res.output
    assert all(name in res.stdout for name in ("00-run_1", "01-run_2", "02-run_3"))


def test_diagnose_of_a_folder_of_runs_reads_the_runs_not_their_exports(tmp_path):
    for name in ("a", "b"):
        with Monitor(tmp_path / "runs" / name, strict=True) as mon:
            for step in range(40):
                mon.step(step, loss=3.0 / (1 + step / 10))
    exported = _invoke("export", "tensorboard", str(tmp_path / "runs" / "a"))
    assert exported.exit_code == 0, exported.output
    res = _invoke("diagnose", str(tmp_path / "runs"), "--json")
    assert res.exit_code == 0, res.output
    assert sorted(d["path"] for d in json.loads(res.stdout)) == [str(tmp_path / "runs" / n) for n in ("a", "b")]


def test_export_parquet_of_a_folder_of_runs_exports_each(imported, tmp_path):
    _, folder = imported
    res = _invoke("export", "parquet", str(folder), str(tmp_path / "fleet"), "--json")
    assert res.exit_code == 0, res.output
    assert sorted({row["run"] for row in json.loads(res.stdout)}) == ["00-run_1", "01-run_2", "02-run_3"]


@pytest.mark.parametrize("verb", ["show", "query", "watch"])
def test_a_view_of_a_stored_run_given_a_log_says_how_to_import_it(imported, verb):
    log, _ = imported
    res = _invoke(verb, str(log), *({"query": ["SELECT 1"], "watch": ["--once"]}.get(verb, [])))
    assert res.exit_code == 2
    assert f"stethoscope import {log} --into DIR" in res.stderr and f"stethoscope diagnose {log}" in res.stderr


def test_show_runs_and_diagnose_count_the_same_steps_logged(tmp_path):
    """Eval-only steps (an HF trainer_state.json evaluating between logging steps): `show` and `runs` counted the
    steps with a loss (10), `diagnose` and `report` every step with a record (20) — 7 of the 32 real logs."""
    rows = []
    for s in range(10, 110, 10):
        rows.append({"loss": 3.0 - s / 100, "learning_rate": 1e-4, "epoch": s / 100, "step": s})
        rows.append({"eval_loss": 3.1 - s / 100, "epoch": s / 100, "step": s + 5})
    state = tmp_path / "trainer_state.json"
    state.write_text(json.dumps({"global_step": 100, "log_history": rows}))
    assert _invoke("import", str(state), "--into", str(tmp_path / "runs" / "hf")).exit_code == 0
    run = tmp_path / "runs" / "hf"
    logged = json.loads(_invoke("diagnose", str(run), "--json").stdout)["steps"]
    assert logged == json.loads(_invoke("diagnose", str(state), "--json").stdout)["steps"] == 20
    assert json.loads(_invoke("show", str(run), "--json").stdout)["logged_steps"] == logged
    assert json.loads(_invoke("runs", str(tmp_path / "runs"), "--json").stdout)[0]["logged_steps"] == logged


def test_an_unreadable_run_in_a_folder_is_named_and_the_others_diagnosed(tmp_path):
    with Monitor(tmp_path / "runs" / "good", strict=True) as mon:
        for step in range(20):
            mon.step(step, loss=3.0 / (1 + step / 10))
    (tmp_path / "runs" / "bad").mkdir()
    (tmp_path / "runs" / "bad" / "rank-00000.sqlite").write_bytes(b"\x13garbage, not a database" * 200)
    res = _invoke("diagnose", str(tmp_path / "runs"), "--json")
    assert res.exit_code == 2
    assert str(tmp_path / "runs" / "bad") in res.stderr and "Traceback" not in res.output
    assert [d["path"] for d in json.loads(res.stdout)] == [str(tmp_path / "runs" / "good")]
