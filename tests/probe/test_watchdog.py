"""The hang watchdog inside a real Monitor: a stalled main thread becomes a `hang` finding with its stacks
and an alert, resolved when steps resume; where it waits is classified."""

from __future__ import annotations

import json
import time

import pytest

from stethoscope import Monitor
from stethoscope.detect.hang import classify
from stethoscope.probe import ProbeConfig, SyncedGC
from stethoscope.store.query import open_run
from stethoscope.testing import MemoryChannel

FAST = ProbeConfig(hang_floor_s=0.6, hang_sample_s=0.2, hang_max_snapshots=3, faulthandler=False)


def stuck_here(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.01)  # the line the watchdog must point at


def test_a_stalled_step_is_a_hang_with_stacks_an_alert_and_a_resolution(tmp_path):
    mem = MemoryChannel()
    with Monitor(tmp_path / "run", serve=FAST, alerts=[mem], strict=True) as mon:
        for step in range(10):
            mon.step(step, loss=1.0 / (step + 1))
        stuck_here(2.0)
        for step in range(10, 13):
            mon.step(step, loss=0.1)
        mon.flush()
        time.sleep(1.2)  # the watchdog sees the steps move again on its next tick
        mon.step(13, loss=0.1)
        mon.flush()
    with open_run(tmp_path / "run") as r:
        _, rows = r.query("SELECT step, message, data FROM findings WHERE type = 'hang' ORDER BY id")
        _, snaps = r.query("SELECT COUNT(DISTINCT snapshot) FROM stacks")
        _, frames = r.query("SELECT function, line FROM stacks WHERE thread = 'MainThread' AND depth = 0")
    assert len(rows) == 2, rows
    first, resolved = json.loads(rows[0][2]), json.loads(rows[1][2])
    assert rows[0][0] == 9 and "no step completed" in rows[0][1] and "after step 9" in rows[0][1]
    assert first["evidence"]["where"] == "user_code" and "time.sleep(0.01)" in first["evidence"]["call"]
    assert first["evidence"]["line"] == stuck_here.__code__.co_firstlineno + 3
    assert resolved["end_step"] == 10 and resolved["evidence"]["recovered"] is True
    assert "hang resolved" in rows[1][1]
    assert 2 <= snaps[0][0] <= 4  # the first snapshot and samples until the steps moved
    assert ("stuck_here", stuck_here.__code__.co_firstlineno + 3) in frames
    hangs = [(a.kind, a.type) for a in mem.sent if a.type == "hang"]
    assert hangs == [("trigger", "hang"), ("resolve", "hang")]
    page = next(a for a in mem.sent if a.type == "hang")  # one process stuck in its own code: no NCCL advice
    assert page.cause.startswith("the main thread is busy or blocked in the training script's own code")
    assert "time.sleep(0.01)" in page.cause and "test_watchdog.py:" in page.cause
    assert "make that call finish" in page.fix and "NCCL" not in page.cause + page.fix


def test_the_timeout_calibrates_to_the_step_time_and_pauses_cover_checkpoints(tmp_path):
    with Monitor(tmp_path / "run", serve=FAST, detect=False) as mon:
        for step in range(12):
            time.sleep(0.15)
            mon.step(step, loss=1.0)
        probe = mon._probe
        assert probe.watchdog.timeout() == pytest.approx(5 * 0.15, rel=0.5)  # 5 x p99 (> the 0.6 s floor)
        with probe.paused():
            time.sleep(1.5)  # a long checkpoint save
        mon.step(12, loss=1.0)
        assert probe.watchdog.hangs == 0
        mon.flush()
    with open_run(tmp_path / "run") as r:
        assert r.query("SELECT COUNT(*) FROM findings WHERE type = 'hang'")[1] == [(0,)]


def _f(function, file, code=""):
    return {"function": function, "file": file, "line": 1, "code": code}


@pytest.mark.parametrize(("frames", "where", "call"), [
    ([_f("train", "/home/u/train.py", "dist.all_reduce(t)"),
      _f("wrapper", "/x/site-packages/torch/distributed/c10d_logger.py"),
      _f("all_reduce", "/x/site-packages/torch/distributed/distributed_c10d.py", "work.wait()")],
     "collective", "all_reduce"),
    ([_f("train", "/home/u/train.py"), _f("barrier", "/x/torch/distributed/distributed_c10d.py")],
     "collective", "barrier"),
    ([_f("train", "/home/u/train.py", "batch = next(it)"),
      _f("__next__", "/x/torch/utils/data/dataloader.py"), _f("_next_data", "/x/torch/utils/data/dataloader.py"),
      _f("_get_data", "/x/torch/utils/data/dataloader.py")], "data_loader", "DataLoader.__next__"),
    ([_f("train", "/home/u/train.py"), _f("save", "/x/torch/serialization.py"),
      _f("_save", "/x/torch/serialization.py")], "file_io", "torch.save"),
    ([_f("train", "/home/u/train.py", "gc.collect()")], "gc", "gc.collect"),
    ([_f("train", "/home/u/train.py"), _f("_compile", "/x/torch/_dynamo/convert_frame.py")], "compile", "_compile"),
    ([_f("train", "/home/u/train.py"), _f("synchronize", "/x/torch/cuda/__init__.py")],
     "device_sync", "torch.cuda.synchronize"),
    ([_f("train", "/home/u/train.py", "loss_value = loss.item()")], "device_sync", "loss_value = loss.item()"),
    ([_f("train", "/home/u/train.py", "wait_for_peer()"), _f("wait_for_peer", "/home/u/util.py", "time.sleep(1)")],
     "user_code", "time.sleep(1)"),
])
def test_where_a_stuck_main_thread_waits(frames, where, call):
    got = classify(frames)
    assert (got["where"], got["call"]) == (where, call)


def test_synced_gc_collects_at_the_same_steps_and_restores_the_collector():
    import gc

    assert gc.isenabled()
    with SyncedGC(every=5) as sgc:
        assert not gc.isenabled()
        done = [s for s in range(21) if sgc.step(s)]
    assert done == [5, 10, 15, 20] and sgc.collections == 4 and gc.isenabled()


GIL_HELD = """
import ctypes, sys
from stethoscope import Monitor
from stethoscope.probe import ProbeConfig

def hold_the_gil():
    ctypes.PyDLL(None).sleep(4)  # a C call that keeps the GIL: no Python thread can run

with Monitor(sys.argv[1], detect=False, serve=ProbeConfig(hang_floor_s=0.5)) as mon:
    for step in range(10):
        mon.step(step, loss=1.0)
    hold_the_gil()
    mon.step(10, loss=1.0)
"""


@pytest.mark.slow
def test_faulthandler_dumps_every_thread_into_the_run_when_the_gil_is_held(tmp_path, cli_env):
    import subprocess
    import sys

    script = tmp_path / "gil.py"
    script.write_text(GIL_HELD)
    res = subprocess.run([sys.executable, str(script), str(tmp_path / "run")], capture_output=True, text=True,
                         env=cli_env, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    dump = (tmp_path / "run" / "hang-traceback-rank-00000.txt").read_text()
    assert "hold_the_gil" in dump and f'File "{script}", line 7' in dump and "stethoscope-watchdog" not in res.stdout
