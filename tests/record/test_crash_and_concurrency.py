"""Real processes: a writer killed with SIGKILL, and a reader process reading while a writer writes."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from stethoscope.store.db import rank_path
from stethoscope.store.query import open_run
from tests.conftest import REPO, run_cli

pytestmark = pytest.mark.slow

CHILD = textwrap.dedent("""
    import sys, time
    from stethoscope import Monitor
    mon = Monitor(sys.argv[1], flush_interval=0.2, detect=False)
    step = 0
    while True:
        mon.step(step, loss=1.0 / (step + 1))
        mon.log({"extra/a": float(step), "extra/b": 2.0 * step}, step)
        if step % 200 == 199:
            mon.flush()
            print(step, flush=True)
        step += 1
""")


def _spawn(code: str, *args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True, env=env)


def test_sigkill_mid_run_keeps_every_flushed_point(tmp_path):
    proc = _spawn(CHILD, str(tmp_path))
    flushed = -1
    try:
        while flushed < 1999:
            line = proc.stdout.readline()
            assert line, "child died early"
            flushed = int(line)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert proc.returncode == -signal.SIGKILL
    con = sqlite3.connect(rank_path(tmp_path, 0))
    assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    con.close()
    with open_run(tmp_path) as r:
        for name in ("train/loss", "extra/a", "extra/b"):
            steps, _ = r.series(name)
            assert steps[: flushed + 1] == list(range(flushed + 1)), name
        assert r.meta()["status"] == "running"  # it never got to say it ended


WRITER = textwrap.dedent("""
    import sys
    from stethoscope.store.db import RunStore, rank_path
    s = RunStore(rank_path(sys.argv[1], 0))
    for step in range(int(sys.argv[2])):
        s.write_points([(f"m/{k:02d}", step, float(step * k), None) for k in range(50)])
    s.close()
""")


def test_reader_never_sees_a_half_written_batch(tmp_path):
    steps = 3000
    proc = _spawn(WRITER, str(tmp_path), str(steps))
    seen_rows, checks = 0, 0
    try:
        while not rank_path(tmp_path, 0).exists():
            time.sleep(0.01)
        time.sleep(0.1)
        while proc.poll() is None or checks < 3:
            with open_run(tmp_path) as r:
                _, rows = r.query("SELECT step, COUNT(*) FROM points GROUP BY step HAVING COUNT(*) != 50")
                assert rows == [], f"partial batch visible: {rows[:3]}"
                seen_rows = max(seen_rows, r.query("SELECT COUNT(*) FROM points")[1][0][0])
            checks += 1
    finally:
        proc.wait(60)
    assert proc.returncode == 0
    assert checks > 3 and seen_rows == steps * 50


def test_cli_reads_while_the_monitor_writes(tmp_path, cli_env):
    proc = _spawn(CHILD, str(tmp_path))
    try:
        assert proc.stdout.readline()
        counts = []
        for _ in range(4):
            res = run_cli("query", str(tmp_path), "SELECT COUNT(*) AS n FROM metrics", "--json", env=cli_env)
            assert res.returncode == 0, res.stderr
            counts.append(int(res.stdout.split('"n":')[1].split("}")[0]))
            res = run_cli("show", str(tmp_path), "--json", env=cli_env)
            assert res.returncode == 0 and '"status": "running"' in res.stdout, res.stderr
        assert counts == sorted(counts) and counts[-1] > counts[0]
    finally:
        proc.kill()
        proc.wait(10)
