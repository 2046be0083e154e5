"""A live tiny training run in its own process, looked at from the CLI over real HTTP: ps, status,
backtrace with the right line, query over the store and the live tables, eval (output captured, never in
the trainer's stdout), dump; `stethoscope run` for a script that never imports stethoscope; py-spy for a
process with no probe."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from stethoscope.store.query import open_run
from tests.conftest import run_cli

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.slow

TRAIN = textwrap.dedent("""
    import os, sys, time, torch
    torch.set_num_threads(1)
    from stethoscope import Monitor
    from stethoscope.probe import ProbeConfig

    def hold(flag):
        while not os.path.exists(flag):
            time.sleep(0.01)  # HOLD LINE

    run_dir = sys.argv[1]
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    marker = "EVAL-OUTPUT-" + "MARK"
    with Monitor(run_dir, model=model, optimizer=opt, serve=ProbeConfig(allow_eval=True, trace_every=5)) as mon:
        for step in range(40):
            loss = model(torch.randn(4, 8)).pow(2).mean()
            loss.backward(); opt.step(); opt.zero_grad()
            mon.step(step, loss=loss)
        mon.flush()
        hold(os.path.join(run_dir, "release"))
    print("trainer done")
""")


def _wait(pred, timeout=90):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.2)
    return False


def test_a_live_run_answers_the_cli_over_http(tmp_path, cli_env, live_dir):
    cli_env["STETHOSCOPE_LIVE_DIR"] = str(live_dir)
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    run = tmp_path / "run"
    hold_line = TRAIN.splitlines().index("        time.sleep(0.01)  # HOLD LINE") + 1  # lines count from 1
    proc = subprocess.Popen([sys.executable, str(script), str(run)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=cli_env)
    try:
        assert _wait(lambda: (run / "rank-00000.sqlite").exists() and list(run.glob("probe-rank-*.json")))
        ps = json.loads(run_cli("ps", "--json", env=cli_env).stdout)
        assert [e["pid"] for e in ps] == [proc.pid] and "token" not in ps[0]
        assert _wait(lambda: json.loads(run_cli("probe", str(run), "status", "--json", env=cli_env).stdout)
                     ["result"]["step"] == 39)
        bt = json.loads(run_cli("probe", str(proc.pid), "backtrace", "--json", "--locals", env=cli_env).stdout)
        main = next(t for t in bt["result"]["threads"] if t["main"])
        top = main["frames"][-1]
        assert (top["function"], top["line"], top["file"]) == ("hold", hold_line, str(script))
        assert top["locals"]["flag"] == repr(str(run / "release"))
        q = run_cli("probe", str(run), "query", "SELECT COUNT(*) AS n FROM metrics WHERE name = 'train/loss'",
                    "--json", env=cli_env)
        assert json.loads(q.stdout)["result"]["rows"] == [[40]]
        trace = json.loads(run_cli("probe", str(run), "query", "--json", "SELECT DISTINCT stage FROM trace "
                                   "ORDER BY stage", env=cli_env).stdout)["result"]["rows"]
        assert trace == [["backward"], ["forward"]]  # module hooks on the sampled steps (trace_every=5)
        refused = run_cli("probe", str(run), "query", "DELETE FROM points", env=cli_env)
        assert refused.returncode == 2 and "only reading is allowed" in refused.stderr
        ev = run_cli("probe", str(run), "eval", "print(marker); mon.last_step", env=cli_env)
        assert ev.returncode == 0 and ev.stdout.split() == ["EVAL-OUTPUT-MARK", "39"]
        ev = run_cli("probe", str(run), "eval", "len(gc.get_objects())", env=cli_env)  # docs/probe.md's example
        assert ev.returncode == 0 and int(ev.stdout) > 1000, ev.stderr  # the trainer never imported gc
        ev = run_cli("probe", str(run), "eval", "undefined_name", env=cli_env)
        assert ev.returncode == 1 and "NameError" in ev.stderr
        dump = json.loads(run_cli("probe", str(run), "dump", "--json", env=cli_env).stdout)["result"]
        with open_run(run) as r:
            _, rows = r.query("SELECT function, line FROM stacks WHERE snapshot = ? AND thread = 'MainThread' "
                              "AND depth = 0", (dump["snapshot"],))
        assert rows == [("hold", hold_line)]
    finally:
        (run / "release").touch()
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-2000:]
    assert out.strip() == "trainer done"  # the eval's print went to the probe, not the trainer's stdout
    assert json.loads(run_cli("ps", "--json", env=cli_env).stdout) == []
    assert not list(run.glob("probe-rank-*.json"))
    gone = run_cli("probe", str(run), "status", env=cli_env)
    assert gone.returncode == 2 and "no probe server registered" in gone.stderr


PLAIN = textwrap.dedent("""
    import os, sys, time
    def idle(flag):
        while not os.path.exists(flag):
            time.sleep(0.01)
    idle(sys.argv[1])
    print("plain done", sys.argv[2])
""")


def test_stethoscope_run_probes_a_script_that_never_imports_it(tmp_path, cli_env, live_dir):
    cli_env["STETHOSCOPE_LIVE_DIR"] = str(live_dir)
    script, flag = tmp_path / "plain.py", tmp_path / "go"
    script.write_text(PLAIN)
    proc = subprocess.Popen([sys.executable, "-m", "stethoscope.cli.main", "run", "--", sys.executable, str(script),
                             str(flag), "x"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env)
    try:
        assert _wait(lambda: json.loads(run_cli("ps", "--json", env=cli_env).stdout))
        pid = json.loads(run_cli("ps", "--json", env=cli_env).stdout)[0]["pid"]
        bt = run_cli("probe", str(pid), "backtrace", env=cli_env)
        assert bt.returncode == 0 and f'File "{script}", line 5, in idle' in bt.stdout
        ev = run_cli("probe", str(pid), "eval", "1", env=cli_env)
        assert ev.returncode == 1 and "403" in ev.stderr and "--allow-eval" in ev.stderr
    finally:
        flag.touch()
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and out.strip() == "plain done x", err


def test_a_process_without_a_probe_gets_its_stacks_from_py_spy_or_a_clear_message(tmp_path, cli_env):
    script, flag = tmp_path / "plain.py", tmp_path / "go"
    script.write_text(PLAIN)
    proc = subprocess.Popen([sys.executable, str(script), str(flag), "y"], env=dict(os.environ),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        res = run_cli("probe", str(proc.pid), "backtrace", env=cli_env)
        if res.returncode == 0:
            assert "idle" in res.stdout and "has no stethoscope probe; stacks from py-spy" in res.stderr
        else:
            assert res.returncode == 2 and ("ptrace is not permitted" in res.stderr or "py-spy" in res.stderr)
            assert "Traceback" not in res.stderr
        status = run_cli("probe", str(proc.pid), "status", env=cli_env)
        assert status.returncode == 2 and "only `backtrace` works" in status.stderr
    finally:
        flag.touch()
        proc.communicate(timeout=30)


def test_probe_all_reports_a_dead_rank_as_such(tmp_path, cli_env, live_dir):
    from stethoscope.probe import registry

    run = tmp_path / "run"
    run.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    registry.write_private(run / "probe-rank-00001.json", {"pid": int(dead.stdout), "host": "127.0.0.1",
                                                            "port": 9, "token": "t", "rank": 1})
    registry.write_private(run / "probe-rank-00002.json", {"pid": os.getpid(), "host": "127.0.0.1",
                                                            "port": 9, "token": "t", "rank": 2})
    res = run_cli("probe", "--all", str(run), "status", env=cli_env)
    assert res.returncode == 1  # no rank answered
    assert "rank 1" in res.stdout and "dead (pid" in res.stdout
    assert "rank 2" in res.stdout and "unreachable" in res.stdout and "Traceback" not in res.stderr


ADOPT = textwrap.dedent("""
    import os, sys, time
    from stethoscope import Monitor
    from stethoscope.probe import ProbeConfig
    with Monitor(sys.argv[1], detect=False, serve=ProbeConfig(hang_floor_s=0.5, faulthandler=False)) as mon:
        for step in range(20):
            mon.step(step, loss=1.0)
        while not os.path.exists(sys.argv[2]):
            time.sleep(0.01)
        mon.step(20, loss=1.0)
""")


def test_a_monitor_in_a_script_started_by_stethoscope_run_adopts_its_probe(tmp_path, cli_env, live_dir):
    cli_env["STETHOSCOPE_LIVE_DIR"] = str(live_dir)
    script, run, flag = tmp_path / "adopt.py", tmp_path / "run", tmp_path / "go"
    script.write_text(ADOPT)
    proc = subprocess.Popen([sys.executable, "-m", "stethoscope.cli.main", "run", "--", sys.executable, str(script),
                             str(run), str(flag)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=cli_env)
    try:
        assert _wait(lambda: json.loads(run_cli("ps", "--json", env=cli_env).stdout) and list(run.glob("probe-*")))
        ps = json.loads(run_cli("ps", "--json", env=cli_env).stdout)
        assert len(ps) == 1 and ps[0]["run_dir"] == str(run) and str(script) in ps[0]["argv"]  # one server
        assert _wait(lambda: json.loads(run_cli("probe", str(run), "status", "--json", env=cli_env).stdout)
                     ["result"]["hang"] is not None)  # the Monitor's watchdog (0.5 s floor) on the adopted probe
    finally:
        flag.touch()
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    with open_run(run) as r:
        _, rows = r.query("SELECT step, json_extract(data, '$.end_step') FROM findings WHERE type = 'hang' ORDER BY id")
    assert rows == [(19, None), (19, 20)]


def test_the_start_up_hook_starts_a_probe_only_with_stethoscope_1(tmp_path, cli_env, live_dir):
    from stethoscope.probe.autostart import PTH_LINE, PTH_NAME

    cli_env["STETHOSCOPE_LIVE_DIR"] = str(live_dir)
    site_dir, flag = tmp_path / "site", tmp_path / "go"
    site_dir.mkdir()
    (site_dir / PTH_NAME).write_text(PTH_LINE)  # what `stethoscope hook install` writes into site-packages
    code = (f"import site, os, time; site.addsitedir({str(site_dir)!r})\n"
            f"while not os.path.exists({str(flag)!r}): time.sleep(0.01)\n")
    for on in ("1", ""):
        env = dict(cli_env, STETHOSCOPE=on)
        proc = subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.PIPE, text=True)
        try:
            if on:
                assert _wait(lambda: json.loads(run_cli("ps", "--json", env=cli_env).stdout))
                assert json.loads(run_cli("ps", "--json", env=cli_env).stdout)[0]["pid"] == proc.pid
                assert run_cli("probe", str(proc.pid), "status", env=cli_env).returncode == 0
            else:
                time.sleep(1.0)
                assert json.loads(run_cli("ps", "--json", env=cli_env).stdout) == []
        finally:
            flag.touch()
            _, err = proc.communicate(timeout=30)
            flag.unlink()
        assert proc.returncode == 0, err
    assert json.loads(run_cli("ps", "--json", env=cli_env).stdout) == []


def test_a_pid_with_no_process_is_said_to_be_none(tmp_path, cli_env):
    """user-trial-3: `probe 999999 status` said 'pid 999999 has no stethoscope probe (it never started one)',
    and `backtrace` printed 'has no stethoscope probe; stacks from py-spy:' before 'no such process'."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(timeout=30)  # reaped: its pid names no process now
    for verb in ("status", "backtrace"):
        res = run_cli("probe", str(proc.pid), verb, env=cli_env)
        assert res.returncode == 2 and res.stderr.strip().count("\n") == 0, res.stderr
        assert f"pid {proc.pid}: no such process" in res.stderr and "has no stethoscope probe" not in res.stderr
