"""diagnose / explain / import / report / compare through the real CLI, on logs written here."""

from __future__ import annotations

import json
import re
import math

import pytest

from tests.conftest import run_cli

KEYS = {"type", "severity", "step", "end_step", "message", "evidence", "causes", "fixes"}


def _hf_state(path, losses, evals=None):
    rows = [{"epoch": i / 100, "learning_rate": 1e-4, "loss": v, "step": s} for i, (s, v) in enumerate(losses)]
    rows += [{"eval_loss": v, "step": s, "epoch": s / 100} for s, v in (evals or [])]
    rows.sort(key=lambda r: r["step"])
    path.write_text(json.dumps({"global_step": losses[-1][0], "log_history": rows}, allow_nan=True))
    return path


def _healthy(n=300):
    return [(s, 2.0 + 3.0 * math.exp(-s / 60) + 0.02 * math.sin(s * 1.7)) for s in range(1, n + 1)]


def test_diagnose_json_schema_and_nan_step(tmp_path, cli_env):
    losses = _healthy()
    losses[149] = (150, float("nan"))
    f = _hf_state(tmp_path / "trainer_state.json", losses)
    res = run_cli("diagnose", str(f), "--json", env=cli_env)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["path"] == str(f) and out["format"] and out["steps"] == 300
    assert out["findings"] and all(KEYS <= set(x) for x in out["findings"])
    nan = [x for x in out["findings"] if x["type"] == "nan"]
    assert nan and nan[0]["step"] == 150 and nan[0]["severity"] == "critical"  # HF counts from 1: step 150
    assert nan[0]["causes"] and nan[0]["fixes"]
    res = run_cli("diagnose", str(f), "--fail-on", "error", env=cli_env)
    assert res.returncode == 1 and "nan" in res.stdout


def test_healthy_run_has_no_warnings_and_several_paths_give_a_list(tmp_path, cli_env):
    (tmp_path / "a").mkdir()
    a = _hf_state(tmp_path / "a" / "trainer_state.json", _healthy())
    b = _hf_state(tmp_path / "b.json", _healthy(200))
    res = run_cli("diagnose", str(a), str(b), "--json", "--fail-on", "warning", env=cli_env)
    assert res.returncode == 0, res.stdout
    out = json.loads(res.stdout)
    assert isinstance(out, list) and len(out) == 2


def test_rank_on_a_foreign_log_is_not_ignored_silently(tmp_path, cli_env):
    f = _hf_state(tmp_path / "trainer_state.json", _healthy())
    res = run_cli("diagnose", str(f), "--rank", "3", env=cli_env)
    assert res.returncode == 0, res.stderr
    assert "--rank applies to stethoscope runs" in res.stderr and str(f) in res.stderr


def test_diagnose_bad_input(tmp_path, cli_env):
    junk = tmp_path / "junk.bin"
    junk.write_bytes(bytes(range(256)) * 10)
    res = run_cli("diagnose", str(junk), env=cli_env)
    assert res.returncode == 2 and "Traceback" not in res.stderr and str(junk) in res.stderr
    res = run_cli("diagnose", str(tmp_path / "missing.log"), env=cli_env)
    assert res.returncode == 2 and "missing.log" in res.stderr and "Traceback" not in res.stderr
    res = run_cli("explain", str(tmp_path / "missing.log"), env=cli_env)
    assert res.returncode == 2 and "missing.log" in res.stderr


def test_explain_from_stdin(cli_env):
    text = ("iteration      120/    1000 | lm loss: 2.5 |\n"
            "RuntimeError: CUDA error: device-side assert triggered\n"
            "../aten/src/ATen/native/cuda/Indexing.cu:1141: indexSelectLargeIndex: block: [0,0,0], thread: [0,0,0] "
            "Assertion `srcIndex < srcSelectDimSize` failed.\n")
    res = run_cli("explain", "-", "--json", env=cli_env, stdin=text)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["findings"] and any("vocab" in " ".join(f["causes"]).lower() for f in out["findings"])


def test_import_then_show_query_diagnose_report(tmp_path, cli_env):
    losses = _healthy()
    f = _hf_state(tmp_path / "trainer_state.json", losses, evals=[(100, 2.6), (200, 2.4), (300, 2.3)])
    run = tmp_path / "imported"
    res = run_cli("import", str(f), "--into", str(run), env=cli_env)
    assert res.returncode == 0, res.stderr
    res = run_cli("query", str(run), "SELECT COUNT(*) AS n FROM metrics WHERE name = 'train/loss'", "--json",
                  env=cli_env)
    assert json.loads(res.stdout) == [{"n": 300}]
    res = run_cli("show", str(run), "--json", env=cli_env)
    assert json.loads(res.stdout)["min_eval_loss"] == pytest.approx(2.3)
    res = run_cli("diagnose", str(run), "--json", env=cli_env)
    assert res.returncode == 0 and json.loads(res.stdout)["steps"] == 300
    res = run_cli("import", str(f), "--into", str(run), env=cli_env)
    assert res.returncode == 2 and "already holds a run" in res.stderr
    out = tmp_path / "r.html"
    res = run_cli("report", str(run), "-o", str(out), env=cli_env)
    assert res.returncode == 0, res.stderr
    html = out.read_text()
    assert "<html" in html.lower() and not re.search(r"<script[^>]+src=", html) and len(html) > 100_000


def test_compare_two_runs(tmp_path, cli_env):
    a = tmp_path / "a"
    b = tmp_path / "b"
    a.mkdir()
    b.mkdir()
    _hf_state(a / "trainer_state.json", _healthy())
    _hf_state(b / "trainer_state.json", [(s, v * 1.1) for s, v in _healthy()])
    out = tmp_path / "cmp.html"
    res = run_cli("compare", str(a / "trainer_state.json"), str(b / "trainer_state.json"), "-o", str(out),
                  env=cli_env)
    assert res.returncode == 0, res.stderr
    assert "last loss" in res.stdout and out.stat().st_size > 100_000


def test_truncated_log_gives_points_and_a_warning_naming_the_line(tmp_path, cli_env):
    lines = [f" iteration {s:8d}/    1000 | learning rate: 1.000E-04 | lm loss: {3.0 - s * 0.001:.6E} | "
             "grad norm: 0.500 | number of skipped iterations:   0 | number of nan iterations:   0 |" for s in range(1, 51)]
    text = "\n".join(lines)
    f = tmp_path / "train.log"
    f.write_text(text[: len(text) - 60])  # the last record is cut mid-line
    res = run_cli("diagnose", str(f), "--json", env=cli_env)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["steps"] >= 49
    assert f"{f}:50" in res.stderr and "warning" in res.stderr


@pytest.mark.parametrize("args", [("report", "{missing}"), ("compare", "{missing}", "{missing}"),
                                  ("import", "{missing}", "--into", "{tmp}/x"), ("compare", "{good}")])
def test_bad_input_to_report_compare_import(tmp_path, cli_env, args):
    good = _hf_state(tmp_path / "trainer_state.json", _healthy())
    fill = {"missing": str(tmp_path / "missing.json"), "tmp": str(tmp_path), "good": str(good)}
    res = run_cli(*(a.format(**fill) for a in args), env=cli_env)
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert "Traceback" not in res.stderr and res.stderr.startswith("stethoscope: error:")
