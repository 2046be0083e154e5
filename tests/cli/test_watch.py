"""`stethoscope watch`: a live terminal view of a run a real Monitor is writing."""

from __future__ import annotations

import itertools
import math
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from stethoscope import Monitor
from stethoscope.cli.watch_view import sparkline
from tests.conftest import run_cli

NAN_STEP = 40


def _train(run, ready: threading.Event, stop: threading.Event, state: dict) -> None:
    with Monitor(run, strict=True, flush_interval=0.1, tokens_per_step=512) as mon:
        for step in itertools.count():
            loss = math.nan if step == NAN_STEP else 3.0 / (1 + 0.01 * step)
            mon.step(step, loss=loss, grad_norm=0.5 + 0.01 * (step % 7))
            if step == 80:
                mon.flush()
                state["flushed"] = step
                ready.set()
            state["last"] = step
            if stop.is_set() or step > 100_000:
                break
            time.sleep(0.002)


def _live_run(tmp_path):
    ready, stop, state = threading.Event(), threading.Event(), {}
    run = tmp_path / "live"
    t = threading.Thread(target=_train, args=(run, ready, stop, state), name="trainer")
    t.start()
    assert ready.wait(120), "the Monitor never reached step 80"
    return run, t, stop, state


def test_watch_once_shows_the_current_step_and_a_finding_of_a_live_run(tmp_path, cli_env):
    run, t, stop, state = _live_run(tmp_path)
    try:
        res = run_cli("watch", str(run), "--once", env=cli_env)
        during = state["last"]
    finally:
        stop.set()
        t.join(60)
    assert res.returncode == 0, res.stderr
    shown = int(re.search(r"step (\d+)", res.stdout).group(1))
    assert state["flushed"] <= shown <= during, (shown, state)
    assert "running" in res.stdout
    finding = [ln for ln in res.stdout.splitlines() if " nan " in f" {ln} "]
    assert finding and str(NAN_STEP) in finding[0] and "critical" in finding[0], res.stdout
    curve = next(ln for ln in res.stdout.splitlines() if ln.startswith("train/loss"))
    assert "x" in curve and "█" in curve and "▁" in curve  # the NaN marked on a falling curve
    assert "grad/norm" in res.stdout and "steps/s" in res.stdout and "tokens/s" in res.stdout


@pytest.mark.slow  # a subprocess interrupted after a few refreshes
def test_ctrl_c_leaves_cleanly(tmp_path, cli_env):
    run, t, stop, _ = _live_run(tmp_path)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "stethoscope.cli.main", "watch", str(run), "--interval", "0.2"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env,
                                # as from a shell: an earlier test's library may have left SIGINT ignored in this
                                # process, which a child inherits (Python then installs no KeyboardInterrupt)
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        chunks: list[str] = []
        reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: proc.stdout.read(64), "")), daemon=True)
        reader.start()
        deadline = time.monotonic() + 120  # a loaded machine starts Python slowly: wait for the first frames
        while "steps/s" not in "".join(chunks) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1)  # a few refreshes
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        reader.join(10)
        out, err = "".join(chunks), proc.stderr.read()
    finally:
        stop.set()
        t.join(60)
    assert proc.returncode == 0, err
    assert "Traceback" not in err and err.strip() == ""
    assert "train/loss" in out


def test_sparkline():
    assert sparkline([0.0, 1.0, None, math.nan, 0.5]).plain == "▁█ x▅"
    assert sparkline([2.0, 2.0]).plain == "▁▁"
    assert sparkline([]).plain == ""


def test_the_rank_furthest_behind_is_named(tmp_path, cli_env):
    from stethoscope.store.db import RunStore, rank_path

    for rank, steps in ((0, 30), (1, 24), (2, 30)):
        s = RunStore(rank_path(tmp_path / "r", rank))
        s.write_points([("train/loss", i, 2.0, s.t0 + i) for i in range(steps)])
        s.close()
    (tmp_path / "r" / "rank-00003.sqlite").write_bytes(b"not sqlite" * 100)
    res = run_cli("watch", str(tmp_path / "r"), "--once", "--rank", "2", env=cli_env)
    assert res.returncode == 0, res.stderr
    assert "rank 2 of 4" in res.stdout and "step 29" in res.stdout
    assert "4 ranks: last step 23..29  rank 1 furthest behind (6 steps)  1 rank file(s) unreadable" in res.stdout


def test_watch_shows_gpu_health_and_says_a_thermal_throttle(tmp_path, cli_env):
    from stethoscope.testing import FakeGpu, FakeNvml

    nvml = FakeNvml([FakeGpu(temp=88.0, reasons=0x40)])
    with Monitor(tmp_path / "g", gpu_health=nvml, system_every=0.02, serve=False) as mon:
        for step in range(20):
            mon.step(step, loss=2.0)
            time.sleep(0.01)
    res = run_cli("watch", str(tmp_path / "g"), "--once", env=cli_env)
    assert res.returncode == 0, res.stderr
    assert re.search(r"GPU util\s+0\.92", res.stdout) and re.search(r"GPU °C\s+88", res.stdout), res.stdout
    assert "GPU THERMAL THROTTLE" in res.stdout and "UNCORRECTABLE" not in res.stdout


def test_one_step_behind_is_one_step(tmp_path, cli_env):
    """user-trial-2: `rank 1 furthest behind (1 steps)` on a torchrun run."""
    from stethoscope.store.db import RunStore, rank_path

    for rank, steps in ((0, 30), (1, 29)):
        s = RunStore(rank_path(tmp_path / "r", rank))
        s.write_points([("train/loss", i, 2.0, s.t0 + i) for i in range(steps)])
        s.close()
    res = run_cli("watch", str(tmp_path / "r"), "--once", env=cli_env)
    assert res.returncode == 0, res.stderr
    assert "2 ranks: last step 28..29  rank 1 furthest behind (1 step)" in res.stdout
