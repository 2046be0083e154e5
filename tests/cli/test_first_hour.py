"""A new user's first hour (issue 9): no silently wrong figure, errors that name the problem, a CLI that
explains itself. Real SQLite stores, the real click command (CliRunner) and real subprocesses."""

from __future__ import annotations

import json
import logging
import math
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from stethoscope.cli.main import cli
from stethoscope.store.db import RunStore, rank_path
from stethoscope.store.query import open_run
from stethoscope.testing import read_curve
from tests.conftest import REPO, run_cli

CURVES = REPO / "tests" / "assets" / "curves"


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def one_line_error(res, *needles: str, code: int = 2) -> str:
    assert res.exit_code == code, (res.exit_code, res.stdout, res.stderr)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("stethoscope: error:"), res.stderr
    assert "Traceback" not in res.stderr + res.stdout
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def hf_state(path: Path, curve: str, every: int = 1) -> Path:
    steps, values = read_curve(str(CURVES / curve))
    rows = [{"step": s, "loss": v, "learning_rate": 1e-4, "epoch": s / 1000}
            for s, v in zip(steps, values)][every - 1::every]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"global_step": steps[-1], "log_history": rows}))
    return path


def store_run(d: Path, n: int = 10, rank: int = 0) -> Path:
    s = RunStore(rank_path(d, rank))
    s.write_points([("train/loss", i, 3.0 - i * 0.1, s.t0 + i) for i in range(n)])
    s.set_meta({"status": "completed", "start_time": s.t0, "end_time": s.t0 + n})
    s.close()
    return d


# -- never silently wrong ------------------------------------------------------------------------
def test_demo_refuses_an_out_dir_that_holds_a_run(tmp_path):
    run = store_run(tmp_path / "old")
    before = (run / "rank-00000.sqlite").read_bytes()
    one_line_error(invoke("demo", "--steps", "5", "--out", str(run)), str(run), "already holds a run", "--force")
    assert (run / "rank-00000.sqlite").read_bytes() == before


def test_demo_default_out_never_reuses_a_run(tmp_path, monkeypatch):
    from stethoscope.demo.run import default_out

    monkeypatch.chdir(tmp_path)
    assert default_out() == Path("runs/demo")
    store_run(tmp_path / "runs" / "demo")
    assert default_out() == Path("runs/demo-2")


def test_demo_force_replaces_the_run(tmp_path):
    pytest.importorskip("torch")
    run = store_run(tmp_path / "old", n=50)
    res = invoke("demo", "--steps", "12", "--out", str(run), "--force")
    assert res.exit_code == 0, res.stderr
    with open_run(run) as r:  # only the new run's 12 steps, not the old run's 50
        assert r.query("SELECT COUNT(*), MAX(step) FROM metrics WHERE name = 'train/loss'")[1] == [(12, 11)]


def test_monitor_never_appends_to_another_run_unless_resume(tmp_path, caplog):
    from stethoscope.capture.monitor import Monitor

    run = tmp_path / "exp"
    with Monitor(run, strict=True, detect=False) as mon:
        mon.step(0, loss=2.0)
    with caplog.at_level(logging.WARNING, logger="stethoscope.capture.run_folder"):
        with Monitor(run, strict=True, detect=False) as other:
            other.step(0, loss=9.0)
    assert other.run_dir == tmp_path / "exp-2" and "resume=True" in caplog.text
    with Monitor(run, strict=True, detect=False, resume=True) as again:
        again.step(1, loss=1.5)
    assert again.run_dir == run
    with open_run(run) as r:
        assert r.series("train/loss") == ([0, 1], [2.0, 1.5])
    with open_run(tmp_path / "exp-2") as r:
        assert r.series("train/loss") == ([0], [9.0])


@pytest.mark.parametrize("inject", ["nan@999", "spike@5", "lr@6"])
def test_demo_injection_outside_the_run_is_an_error(tmp_path, inject):
    one_line_error(invoke("demo", "--steps", "5", "--inject", inject, "--out", str(tmp_path / "d")),
                   f"--inject {inject}", "outside the run", "steps 0-4")
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("curve,every", [("plateau_unigram.txt", 1), ("divergence_climb.txt", 1),
                                         ("spike_recover.txt", 10)])
def test_show_and_diagnose_agree_on_imported_runs(tmp_path, curve, every):
    run = tmp_path / "run"
    assert invoke("import", str(hf_state(tmp_path / "log" / "trainer_state.json", curve, every)),
                  "--into", str(run)).exit_code == 0
    shown = json.loads(invoke("show", str(run), "--json").stdout)["findings_list"]
    diagnosed = json.loads(invoke("diagnose", str(run), "--json").stdout)["findings"]
    key = lambda f: (f["type"], f["severity"], f["step"], f["end_step"], f["message"])  # noqa: E731
    assert [key(f) for f in shown] == [key(f) for f in diagnosed]
    assert any(f["severity"] != "info" or f["type"] == "healthy" for f in diagnosed)  # the verdicts are there
    text = invoke("show", str(run)).stdout
    assert "findings" in text and "none" not in text.split("findings")[1].split("\n")[0]


def test_show_says_last_step_and_logged_steps(tmp_path):
    run = tmp_path / "run"
    invoke("import", str(hf_state(tmp_path / "trainer_state.json", "spike_recover.txt", every=10)), "--into", str(run))
    s = json.loads(invoke("show", str(run), "--json").stdout)
    assert s["last_step"] == 1999 and s["logged_steps"] == 200
    text = invoke("show", str(run)).stdout
    assert re.search(r"last step\s*│\s*1,999", text) and re.search(r"steps logged\s*│\s*200", text)
    assert "last step 1,999, 200 steps logged" in invoke("diagnose", str(run)).stdout


def test_times_print_as_dates_and_durations(tmp_path):
    run = store_run(tmp_path / "run")
    for args in (("query", str(run), "SELECT step, time FROM metrics LIMIT 2"),
                 ("query", str(run), "SELECT * FROM run"), ("runs", str(tmp_path)), ("show", str(run))):
        out = invoke(*args).stdout
        assert not re.search(r"\de\+0?9", out), (args, out)
    out = invoke("query", str(run), "SELECT step, time FROM metrics LIMIT 1").stdout
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", out)
    assert re.search(r"│\s*10s\s*│", invoke("runs", str(tmp_path)).stdout)  # duration of a 10 s run


MARKUP = "sweep[lr=1e-3][bold]"


def test_user_strings_are_never_markup(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # short relative paths: a table cell never wraps them
    tmp_path = Path(".")
    log = hf_state(tmp_path / MARKUP / "trainer_state.json", "divergence_climb.txt")
    run, other = tmp_path / "runs" / MARKUP, tmp_path / "runs" / f"b{MARKUP}"
    for args in (("import", str(log), "--into", str(run)), ("import", str(log), "--into", str(other))):
        res = invoke(*args)
        assert res.exit_code == 0 and MARKUP in res.stdout, res.stdout
    for args in (("show", str(run)), ("runs", str(tmp_path / "runs")), ("diagnose", str(run)), ("diagnose", str(log)),
                 ("query", str(run), f"SELECT '{MARKUP}' AS name"),
                 ("report", str(run), "-o", str(tmp_path / f"{MARKUP}.html")),
                 ("compare", str(run), str(other), "-o", str(tmp_path / "c.html"))):
        res = invoke(*args)
        assert res.exit_code in (0, 1) and MARKUP in res.stdout.replace("\n", ""), (args, res.stdout)
    crash = tmp_path / f"{MARKUP}.log"
    crash.write_text("Traceback (most recent call last):\n  File \"t.py\", line 1\ntorch.OutOfMemoryError: "
                     "CUDA out of memory. Tried to allocate 2.00 GiB\n")
    assert MARKUP in invoke("explain", str(crash)).stdout


def test_compare_of_two_lightning_runs_shows_their_hparams(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name, lr, epochs in (("a", 3e-4, 10), ("b", 1e-3, 1)):
        d = Path(name) / "version_0"
        d.mkdir(parents=True)
        (d / "hparams.yaml").write_text(f"lr: {lr}\nnum_epochs: {epochs}\nd_model: 768\n")
        (d / "metrics.csv").write_text("epoch,step,train_loss\n" + "".join(f"0,{s},{3 - s / 100}\n" for s in range(50)))
    res = invoke("compare", "a/version_0", "b/version_0", "-o", "c.html")
    assert res.exit_code == 0, res.stderr
    rows = {ln.split("│")[1].strip(): ln for ln in res.stdout.splitlines() if ln.count("│") >= 3}
    assert "0.0003" in rows["lr"] and "0.001" in rows["lr"] and "10" in rows["num_epochs"]
    assert "d_model" not in rows  # the same in both


# -- errors that name the problem ----------------------------------------------------------------
def corrupt_pages(f: Path) -> None:
    data = bytearray(f.read_bytes())
    data[4096 * 3:4096 * 7] = b"\xa5" * (4096 * 4)
    f.write_bytes(bytes(data))


@pytest.fixture
def two_ranks_one_corrupt(tmp_path):
    run = tmp_path / "runs" / "multi"
    for rank in (0, 1):
        s = RunStore(rank_path(run, rank))
        s.write_points([("train/loss", i, 3.0 - i * 1e-4, s.t0 + i) for i in range(5000)])
        s.close()
    corrupt_pages(rank_path(run, 1))
    store_run(tmp_path / "runs" / "good")
    return run


def test_runs_lists_every_run_and_marks_the_bad_one(tmp_path, two_ranks_one_corrupt):
    bad = tmp_path / "runs" / "bad"
    store_run(bad)
    corrupt_pages(rank_path(bad, 0)) if rank_path(bad, 0).stat().st_size > 4096 * 7 else \
        rank_path(bad, 0).write_bytes(b"\x00garbage" * 500)
    res = invoke("runs", str(tmp_path / "runs"), "--json")
    assert res.exit_code == 0, res.stderr
    listed = {Path(r["run"]).name: r for r in json.loads(res.stdout)}
    assert set(listed) == {"bad", "good", "multi"}
    assert listed["bad"]["status"].startswith("unreadable:") and "rank-00000.sqlite" in listed["bad"]["status"]
    assert listed["good"]["logged_steps"] == 10
    assert "rank-00001.sqlite" in listed["multi"]["skipped_ranks"][0]
    table = CliRunner().invoke(cli, ["runs", str(tmp_path / "runs")], env={"COLUMNS": "1000"}).stdout
    bad_row = next(line for line in table.splitlines() if "unreadable" in line)
    assert "none" not in bad_row  # nothing is known of an unreadable run's findings: '-', not 'none'


def test_show_and_query_read_the_intact_ranks_and_say_which_were_skipped(two_ranks_one_corrupt):
    run = two_ranks_one_corrupt
    bad = str(rank_path(run, 1))
    for args in (("show", str(run)), ("query", str(run), "SELECT rank, COUNT(*) FROM metrics GROUP BY rank")):
        res = invoke(*args)
        assert res.exit_code == 0, res.stderr
        warning = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert len(warning) == 1 and "skipped" in warning[0] and bad in warning[0] and "corrupt" in warning[0]
    assert "5,000" in invoke("query", str(run), "SELECT rank, COUNT(*) FROM metrics GROUP BY rank").stdout


@pytest.mark.parametrize("args,needles", [
    (("show",), ("missing argument 'RUN'", "stethoscope show --help")),
    (("diagnose", "x", "--nope"), ("no such option", "--nope", "stethoscope diagnose --help")),
    (("shoe",), ("no such command 'shoe'", "stethoscope --help")),
    (("diagnose", "x", "--fail-on", "bad"), ("--fail-on", "stethoscope diagnose --help")),
])
def test_usage_errors_are_one_line(args, needles):
    one_line_error(invoke(*args), *needles)


def test_unexpected_errors_are_one_line_and_debug_shows_the_traceback(tmp_path, monkeypatch):
    import stethoscope.cli.listing as listing

    def boom(*_a, **_k):
        raise RuntimeError("a bug")

    monkeypatch.setattr(listing, "show_run", boom)
    one_line_error(invoke("show", str(tmp_path)), "RuntimeError: a bug", "--debug")
    res = invoke("show", str(tmp_path), "--debug")
    assert res.exit_code == 2 and "Traceback" in res.stderr and "a bug" in res.stderr


def test_exit_status_0_1_2_through_a_real_process(tmp_path, cli_env):
    log = hf_state(tmp_path / "trainer_state.json", "divergence_climb.txt")
    assert run_cli("diagnose", str(log), env=cli_env).returncode == 0
    assert run_cli("diagnose", str(log), "--fail-on", "warning", env=cli_env).returncode == 1
    res = run_cli("diagnose", str(tmp_path / "nope.json"), env=cli_env)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr


def test_empty_inputs_say_what_happened(tmp_path):
    run = store_run(tmp_path / "run")
    one_line_error(invoke("query", str(run), ""), "no SQL given", "--schema")
    empty, binary = tmp_path / "empty.log", tmp_path / "core.bin"
    empty.write_text("")
    binary.write_bytes(bytes(range(256)) * 64)
    one_line_error(invoke("explain", str(empty)), str(empty), "empty")
    one_line_error(invoke("explain", str(binary)), str(binary), "binary")
    one_line_error(invoke("explain", "-", ), "<stdin>", "empty")
    nothing = tmp_path / "nothing"
    (nothing / "sub").mkdir(parents=True)
    one_line_error(invoke("runs", str(nothing)), str(nothing), "no runs here")


def test_diagnose_good_and_bad_inputs_prints_the_good_one(tmp_path):
    good = hf_state(tmp_path / "good.json", "divergence_climb.txt")
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"\x00\x01\x02garbage\xff" * 100)
    res = invoke("diagnose", str(good), str(bad))
    assert res.exit_code == 2
    assert str(good) in res.stdout and "divergence" in res.stdout
    one_line_error(res, str(bad))
    res = invoke("diagnose", str(good), str(bad), "--json")
    assert [d["path"] for d in json.loads(res.stdout)] == [str(good)]


def test_torch_hint_fits_the_install(monkeypatch):
    import sys

    from stethoscope.cli.demo_view import torch_hint

    assert "-e '.[torch]'" in torch_hint()  # this checkout is installed editable (pip install -e)
    monkeypatch.setitem(sys.modules, "torch", None)  # as if torch were not installed
    one_line_error(invoke("demo", "--steps", "5"), "needs torch", "pip install -e '.[torch]'")


# -- explains itself -----------------------------------------------------------------------------
def test_help_of_every_verb():
    top = invoke("--help").stdout
    verbs = [ln.split()[0] for ln in top.split("Commands:")[1].splitlines() if ln.startswith("  ") and
             not ln.startswith("   ") and ln.split()[0] in cli.commands]
    assert verbs[:9] == ["demo", "show", "diagnose", "report", "query", "runs", "compare", "import", "explain"]
    assert "Exit status: 0 fine, 1 findings at or above --fail-on, 2 usage or input error" in " ".join(top.split())
    flat_top = " ".join(top.split())
    for verb in verbs:
        cmd = cli.commands[verb]
        summary = cmd.get_short_help_str(limit=1000)
        assert " ".join(summary.split()) in flat_top and not summary.endswith("..."), verb
        text = invoke(verb, "--help").stdout
        examples = [ln.strip() for ln in text.split("Examples:")[1].split("\n\n")[0].splitlines() if ln.strip()]
        assert 2 <= len(examples) <= 3 and all(ln.startswith(("stethoscope ", "python ")) for ln in examples), verb
        for param in cmd.params:
            if param.param_type_name == "option" and param.name != "help":
                assert param.help, f"{verb} {param.opts}"


def test_query_schema_and_unknown_table_help(tmp_path):
    run = store_run(tmp_path / "run")
    res = invoke("query", str(run), "--schema", "--json")
    rows = json.loads(res.stdout)
    tables = {r["table"] for r in rows}
    assert {"metrics", "findings", "alerts", "events", "series", "run", "points", "batches"} <= tables
    metrics = {r["column"]: r["unit / meaning"] for r in rows if r["table"] == "metrics"}
    assert set(metrics) == {"rank", "step", "name", "value", "time"} and "unix seconds" in metrics["time"]
    for r in rows:  # every column listed can be selected
        if r["table"] != "series.name":
            assert invoke("query", str(run), f"SELECT {r['column']} FROM {r['table']} LIMIT 0").exit_code == 0, r
    names = {r["column"]: r["unit / meaning"] for r in rows if r["table"] == "series.name"}
    assert names["gpu/temp_c"] == "°C" and names["gpu/util_ratio"] == "ratio" and names["memory/rss_gib"] == "GiB"
    one_line_error(invoke("query", str(run), "SELECT * FROM metric"), "no such table: metric", "tables: metrics",
                   "--schema")


def test_demo_ends_with_the_next_commands_one_per_line(tmp_path, capsys):
    from stethoscope.cli.demo_view import print_next

    print_next(tmp_path / "runs" / "demo 2")
    lines = capsys.readouterr().out.splitlines()
    cmds = [ln.strip() for ln in lines if ln.startswith("  stethoscope ")]
    assert [c.split()[1] for c in cmds][:4] == ["diagnose", "report", "show", "query"]
    assert all(f"'{tmp_path / 'runs' / 'demo 2'}'" in c for c in cmds)  # quoted: copy-pasteable


def test_min_severity_collapses_info_findings(tmp_path):
    steps, values = read_curve(str(CURVES / "spike_recover.txt"))
    for k in range(200, 2000, 150):  # small recovered spikes: info
        values[k] *= 1.15
    log = tmp_path / "trainer_state.json"
    log.write_text(json.dumps({"log_history": [{"step": s, "loss": v} for s, v in zip(steps, values)]}))
    full = json.loads(invoke("diagnose", str(log), "--json").stdout)["findings"]
    infos = [f for f in full if f["severity"] == "info" and f["type"] != "healthy"]
    assert len(infos) >= 3
    text = invoke("diagnose", str(log)).stdout
    assert text.count(" INFO ") <= 1  # only the run's verdict, if any
    summary = [ln for ln in text.splitlines() if "--min-severity info" in ln]
    assert len(summary) == 1 and re.search(r"\d+ loss spikes", summary[0])
    assert invoke("diagnose", str(log), "--min-severity", "info").stdout.count(" INFO ") >= len(infos)
    warn_json = json.loads(invoke("diagnose", str(log), "--json", "--min-severity", "warning").stdout)["findings"]
    assert all(f["severity"] != "info" for f in warn_json)
    assert "--min-severity [info|warning|error|critical]" in invoke("show", "--help").stdout


def test_nan_and_inf_cells_print_plainly(tmp_path):
    run = store_run(tmp_path / "run")
    out = invoke("query", str(run), "SELECT 1e999 AS big, NULL AS n, 'x' AS s").stdout
    assert "inf" in out and math.isinf(float("inf"))
    shutil.rmtree(run)
