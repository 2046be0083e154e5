"""Real processes: kill -9 during checkpoint saves, SIGTERM preemption. Children are forked from the
test process (torch already imported: a fresh interpreter would spend seconds importing it)."""

from __future__ import annotations

import os
import random
import signal
import struct
import time
from pathlib import Path

import torch

import stethoscope
from stethoscope.checkpoint import disk
from tests.checkpoint import tiny

WIDTH = 512  # ~1 M parameters: a save (model + Adam, ~12 MB) is most of each step's time


def _child(run_dir: Path, ckpt: Path, losses: Path, steps: int, every: int, **options) -> None:
    """Train (resuming), append `step loss` records to `losses`; exit without running the parent's cleanup."""
    code = 0
    try:
        fd = os.open(losses, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        model, opt, sched, pos = tiny.make(WIDTH)
        ck = stethoscope.Checkpoints(ckpt, every=every, keep_last=2, scheduler=sched, data=pos, **options)
        with stethoscope.Monitor(run_dir, model, opt, checkpoints=ck, resume=True, detect=False) as mon:
            start = mon.resume()
            os.write(fd, struct.pack("<id", -1, start))  # a marker: where this process began
            for step in range(start, steps):
                loss = tiny.train_step(model, opt, sched, pos)
                os.write(fd, struct.pack("<id", step, loss))  # one write: a kill never leaves half a record
                mon.step(step, loss=loss)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001
        import traceback

        traceback.print_exc()
        code = 3
    os._exit(code)


def _fork(*args, **options) -> int:
    pid = os.fork()
    if pid == 0:
        _child(*args, **options)
    return pid


def _records(path: Path) -> list[tuple[int, float]]:
    data = path.read_bytes() if path.exists() else b""
    return [struct.unpack_from("<id", data, i) for i in range(0, len(data) - len(data) % 12, 12)]


def _warm_up(tmp: Path) -> None:
    """Import what a child needs once in the parent (torch.optim's first use costs seconds), not per child."""
    model, opt, sched, pos = tiny.make(WIDTH)
    tiny.train_step(model, opt, sched, pos)
    stethoscope.Checkpoints(tmp / "warm", extra={"model": model}, on_signal=None).save(1)


def _markers(path: Path) -> int:
    return sum(s == -1 for s, _ in _records(path))


def _reference(steps: int) -> list[float]:
    model, opt, sched, pos = tiny.make(WIDTH)
    return [tiny.train_step(model, opt, sched, pos) for _ in range(steps)]


def kill_during_saves(tmp: Path, kills: int, seed: int = 0) -> dict[str, int]:
    """Kill a training child `kills` times at random moments (it saves every step); every resume must
    continue from the newest verified checkpoint and reproduce the uninterrupted losses bitwise."""
    rng = random.Random(seed)
    run_dir, ckpt, losses = tmp / "run", tmp / "ck", tmp / "losses.bin"
    _warm_up(tmp)
    mid_save, expected_starts = 0, [0]
    for _ in range(kills):
        began = _markers(losses)
        pid = _fork(run_dir, ckpt, losses, 10**6, 1, on_signal=None)
        deadline = time.monotonic() + 60
        while _markers(losses) == began and time.monotonic() < deadline:  # resumed and training
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, 0.3))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        mid_save += any(ckpt.glob(f".tmp-step-*-{pid}-*"))  # this child died inside a save
        ok = [i for i in disk.catalogue(ckpt, check_hashes=True) if i.status == "ok"]
        assert ok or expected_starts[-1] == 0, "a kill left no verified checkpoint behind"
        latest = stethoscope.Checkpoints(ckpt).load_latest()
        assert (latest["step"] if latest else None) == (ok[-1].step if ok else None)
        expected_starts.append(ok[-1].step + 1 if ok else 0)
    last = max(s for s, _ in _records(losses)) + 1
    pid = _fork(run_dir, ckpt, losses, last + 3, 1, on_signal=None)
    assert os.waitpid(pid, 0)[1] == 0
    records = _records(losses)
    ref = _reference(last + 3)
    wrong = [(s, v, ref[s]) for s, v in records if s >= 0 and v != ref[s]]
    assert not wrong, f"resumed losses differ from the uninterrupted run: {wrong[:5]}"
    assert [int(v) for s, v in records if s == -1] == expected_starts  # each resumed from the newest verified
    return {"kills": kills, "killed_mid_save": mid_save, "records": len(records)}


def test_kill9_during_saves_always_resumes_from_a_verified_checkpoint(tmp_path):
    stats = kill_during_saves(tmp_path, kills=12)
    assert stats["killed_mid_save"] >= 1  # most kills land inside a save (a save is most of a step)


def test_sigterm_saves_an_emergency_checkpoint_and_exits_cleanly(tmp_path):
    losses = tmp_path / "losses.bin"
    _warm_up(tmp_path)
    pid = _fork(tmp_path / "run", tmp_path / "ck", losses, 10**6, 10**6)  # no scheduled save
    deadline = time.monotonic() + 60
    while len(_records(losses)) < 5 and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(pid, signal.SIGTERM)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    infos = disk.catalogue(tmp_path / "ck", check_hashes=True)
    assert len(infos) == 1 and infos[0].status == "ok"
    assert infos[0].step == max(s for s, _ in _records(losses))  # the step in flight was finished first
    from stethoscope.store.query import open_run

    with open_run(str(tmp_path / "run")) as r:
        status_row = r.query("SELECT value FROM run WHERE key = 'status'")[1]
        reasons = r.query("SELECT message FROM events WHERE kind = 'checkpoint'")[1]
    assert "preempted (SIGTERM)" in status_row[0][0] and "SIGTERM" in reasons[0][0]


def test_torch_threads_are_one():
    assert torch.get_num_threads() == 1  # forked children inherit it
