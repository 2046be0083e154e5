"""`stethoscope dashboard` as a user runs it: a subprocess serving 127.0.0.1, and its one-line errors."""

from __future__ import annotations

import json
import math
import socket
import subprocess
import sys
import urllib.request

from stethoscope import Monitor
from tests.conftest import run_cli


def _tiny(path):
    with Monitor(path, flush_interval=0.1) as mon:
        for s in range(30):
            mon.step(s, loss=2.0 * math.exp(-s / 10) + 1.0, tokens=32)


def test_dashboard_serves_the_runs_under_a_folder(tmp_path, cli_env):
    _tiny(tmp_path / "runs" / "one")
    proc = subprocess.Popen([sys.executable, "-m", "stethoscope.cli.main", "dashboard", str(tmp_path / "runs"),
                             "--port", "0"], env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("stethoscope dashboard: http://127.0.0.1:"), (line, proc.stderr.read())
        url = line.split()[2]
        _tiny(tmp_path / "runs" / "two")  # started after the dashboard: listed on the next request
        with urllib.request.urlopen(url + "api/runs", timeout=30) as r:
            keys = [run["key"] for run in json.loads(r.read())["runs"]]
        assert keys == ["one", "two"]
        with urllib.request.urlopen(url, timeout=30) as r:
            assert b"stethoscope dashboard" in r.read()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_dashboard_errors_are_one_line_exit_2(tmp_path, cli_env):
    r = run_cli("dashboard", str(tmp_path / "missing"), env=cli_env)
    assert r.returncode == 2 and "no such file or directory" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    (tmp_path / "empty").mkdir()
    r = run_cli("dashboard", str(tmp_path / "empty"), env=cli_env)
    assert r.returncode == 2 and "no runs here" in r.stderr
    _tiny(tmp_path / "run")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        r = run_cli("dashboard", str(tmp_path / "run"), "--port", str(taken.getsockname()[1]), env=cli_env)
    assert r.returncode == 2 and "is in use" in r.stderr and len(r.stderr.strip().splitlines()) == 1
