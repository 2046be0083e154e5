"""Checkpoints in one process: bitwise resume, damage detection, retention, failures that never raise."""

from __future__ import annotations

import logging
import os
import random
from pathlib import Path

import numpy as np
import pytest
import torch

import stethoscope
from stethoscope.checkpoint import disk
from stethoscope.checkpoint.manifest import verify
from stethoscope.errors import InternalError
from stethoscope.store.query import open_run
from tests.checkpoint import tiny


def _events(run: Path) -> list[tuple]:
    with open_run(str(run)) as r:
        return r.query("SELECT step, kind, message FROM events WHERE source = 'checkpoint' ORDER BY id")[1]


def test_resume_is_bitwise_deterministic_and_recorded(tmp_path):
    ref = tiny.run(tmp_path / "a", tmp_path / "ca", 30, every=5)
    first = tiny.run(tmp_path / "b", tmp_path / "cb", 17, every=5)  # interrupted after step 16
    torch.manual_seed(99), np.random.seed(5), random.seed(3)  # a restart does not share the old RNGs
    rest = tiny.run(tmp_path / "b", tmp_path / "cb", 30, every=5)
    assert min(rest) == 16  # the newest checkpoint (step 15) + 1
    assert {**first, **rest} == ref  # every loss bitwise equal to the uninterrupted run
    kinds = [k for _, k, _ in _events(tmp_path / "b")]
    assert kinds.count("checkpoint_loaded") == 1 and kinds.count("checkpoint") == 5


def _damage(path: Path, how: str, rng: random.Random) -> None:
    if how == "truncate":
        path.write_bytes(path.read_bytes()[: rng.randrange(path.stat().st_size)])
    elif how == "delete":
        path.unlink()
    else:
        data = bytearray(path.read_bytes())
        i = rng.randrange(len(data))
        data[i] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["truncate", "bitflip", "delete"])
def test_every_damaged_file_is_detected_by_verify_and_resume(tmp_path, how, caplog):
    tiny.run(tmp_path / "run", tmp_path / "ck", 11, every=5)
    newest = disk.step_dir(tmp_path / "ck", 10)
    pristine = {p.name: p.read_bytes() for p in newest.iterdir()}
    rng = random.Random(how)
    for name in sorted(pristine):  # every file of the checkpoint, manifest included
        for _ in range(3 if how == "bitflip" else 1):
            _damage(newest / name, how, rng)
            body, why = verify(newest)
            assert why is not None, f"{how} of {name} not detected"
            caplog.clear()
            with caplog.at_level(logging.WARNING):
                state = stethoscope.Checkpoints(tmp_path / "ck").load_latest()
            assert state["step"] == 5  # skipped to the older good one
            assert str(newest) in caplog.text and why in caplog.text
            for n, data in pristine.items():
                (newest / n).write_bytes(data)
    assert verify(newest)[1] is None


def test_half_written_checkpoint_is_listed_partial_and_never_loaded(tmp_path):
    tiny.run(tmp_path / "run", tmp_path / "ck", 6, every=5)
    tmp = tmp_path / "ck" / ".tmp-step-00000009-1-1"
    tmp.mkdir()
    (tmp / "model.pt").write_bytes(b"half")
    (disk.step_dir(tmp_path / "ck", 8)).mkdir()  # a step folder without a manifest
    infos = disk.catalogue(tmp_path / "ck")
    assert [(i.step, i.status) for i in infos] == [(5, "unverified"), (8, "corrupt"), (9, "partial")]
    assert "no manifest.json" in infos[1].reason
    assert stethoscope.Checkpoints(tmp_path / "ck").load_latest()["step"] == 5


def test_retention_keeps_newest_best_and_milestones(tmp_path):
    model = torch.nn.Linear(2, 2)
    ck = stethoscope.Checkpoints(tmp_path, keep_last=2, keep_best="eval/loss", milestones_every=10,
                                 extra={"model": model}, on_signal=None, strict=True)
    for step in range(1, 26):
        ck.note({"eval/loss": abs(step - 7) + 0.5})  # best at step 7
        assert ck.save(step) is not None
    assert [i.step for i in ck.list()] == [7, 10, 20, 24, 25]
    assert [i.milestone for i in ck.list()] == [False, True, True, False, False]
    assert ck.list()[0].metrics == {"eval/loss": 0.5}
    ck.config.keep_last = 1
    assert [i.step for i in ck.prune()] == [24]
    ck.close()  # joins the thread that deletes the pruned folders (left running, the leak check caught it under load)


def test_weights_only_by_default_trust_to_unpickle(tmp_path, caplog):
    class Odd:  # a pickled object: refused by weights_only loading
        def __init__(self) -> None:
            self.x = 1

        def state_dict(self) -> dict:
            return {"obj": self}

        def load_state_dict(self, state: dict) -> None:
            self.x = state["obj"].x

    globals()["Odd"] = Odd  # picklable by reference for the trusted load
    Odd.__qualname__ = "Odd"
    ck = stethoscope.Checkpoints(tmp_path, extra={"odd": Odd()}, on_signal=None, strict=True)
    ck.save(3)
    with caplog.at_level(logging.WARNING):
        assert ck.load_latest() is None
    assert "does not load" in caplog.text and "step-00000003" in caplog.text
    trusted = stethoscope.Checkpoints(tmp_path, trust=True, on_signal=None)
    assert trusted.load_latest()["odd"]["obj"].x == 1


def test_a_failed_save_is_counted_and_recorded_never_raised(tmp_path):
    (tmp_path / "ck").write_text("a file where the folder should be")
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ck = stethoscope.Checkpoints(tmp_path / "ck", every=2, on_signal=None)
    with stethoscope.Monitor(tmp_path / "run", model, opt, checkpoints=ck) as mon:
        for step in range(5):
            mon.step(step, loss=1.0)
    assert ck.errors == 2 and mon.internal_errors == 0
    assert [k for _, k, _ in _events(tmp_path / "run")] == ["checkpoint_failed"] * 2
    strict = stethoscope.Checkpoints(tmp_path / "ck", on_signal=None, strict=True, extra={"m": model})
    with pytest.raises(InternalError):
        strict.save(1)


def test_async_save_writes_the_state_of_its_step(tmp_path):
    model = torch.nn.Linear(4, 4)
    ck = stethoscope.Checkpoints(tmp_path, async_save=True, on_signal=None, strict=True, extra={"model": model})
    ck.save(1)
    with torch.no_grad():
        model.weight.add_(1.0)  # training goes on while the background thread writes
    ck.wait()
    saved = ck.load_latest()["model"]["weight"]
    assert torch.equal(saved + 1.0, model.weight.detach())
    ck.close()


def test_monitor_state_restores_detectors(tmp_path):
    tiny.run(tmp_path / "a", tmp_path / "ca", 12, every=10)
    state = torch.load(disk.step_dir(tmp_path / "ca", 10) / "monitor.pt", weights_only=True)
    assert state["detection"]["done_through"] is not None and state["detection"]["detectors"]


def test_core_imports_checkpoints_without_torch():
    import subprocess
    import sys

    code = ("import sys, stethoscope; c = stethoscope.Checkpoints('x', every=5); "
            "assert 'torch' not in sys.modules; print('ok')")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": str(Path(__file__).parents[2] / "src"), "PATH": os.environ["PATH"]})
    assert res.stdout.strip() == "ok", res.stderr


def test_requested_checkpoint_and_sigusr1_stop_mode(tmp_path):
    import signal

    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ck = stethoscope.Checkpoints(tmp_path / "ck", on_signal="stop", strict=True)
    with stethoscope.Monitor(tmp_path / "run", model, opt, checkpoints=ck) as mon:
        mon.control.request_checkpoint("a rule asked for one")
        mon.step(3, loss=1.0)
        os.kill(os.getpid(), signal.SIGUSR1)  # handled between bytecodes: acted on after the next step
        ctl = mon.step(4, loss=1.0)
        assert ctl.stop and "SIGUSR1" in ctl.reasons[-1]
    assert signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL  # the old handler is back after close
    assert [i.step for i in ck.list()] == [3, 4]
    assert [m for _, k, m in _events(tmp_path / "run") if k == "checkpoint"][1].endswith("(SIGUSR1 (preemption))")


def test_resume_skips_a_damaged_newest_and_records_why(tmp_path):
    tiny.run(tmp_path / "run", tmp_path / "ck", 11, every=5)
    (disk.step_dir(tmp_path / "ck", 10) / "optimizer.pt").unlink()
    assert min(tiny.run(tmp_path / "run", tmp_path / "ck", 12, every=5)) == 6
    skipped = [m for _, k, m in _events(tmp_path / "run") if k == "checkpoint_skipped"]
    assert skipped == [f"skipped checkpoint {disk.step_dir(tmp_path / 'ck', 10)}: optimizer.pt is missing"]


def test_rollback_restores_supersedes_newer_and_scales_lr(tmp_path):
    ref = tiny.run(tmp_path / "a", tmp_path / "ca", 25, every=5)
    model, opt, sched, pos = tiny.make()
    ck = stethoscope.Checkpoints(tmp_path / "ck", every=5, scheduler=sched, data=pos, on_signal=None, strict=True)
    with stethoscope.Monitor(tmp_path / "run", model, opt, checkpoints=ck) as mon:
        for step in range(21):
            mon.step(step, loss=tiny.train_step(model, opt, sched, pos))
        assert ck.rollback(before=13) == 10
        assert [i.step for i in ck.list()] == [10]  # 15 and 20 set aside, not deleted (5: retention, keep_last=3)
        assert sorted(p.name[:24] for p in (tmp_path / "ck").glob("superseded-*")) == [
            "superseded-step-00000015", "superseded-step-00000020"]
        again = {s: tiny.train_step(model, opt, sched, pos) for s in range(11, 16)}
        assert again == {s: ref[s] for s in range(11, 16)}  # the same steps, bitwise
        assert ck.rollback(before=12, lr_factor=0.5) == 10
        assert opt.param_groups[0]["lr"] == pytest.approx(ref_lr(10) * 0.5)
    assert [k for _, k, _ in _events(tmp_path / "run")].count("rollback") == 2


def ref_lr(step: int) -> float:
    _, opt, sched, _ = tiny.make()
    for _ in range(step + 1):
        opt.step()
        sched.step()
    return opt.param_groups[0]["lr"]


def test_each_rank_saves_into_its_own_folder(tmp_path):
    model = torch.nn.Linear(2, 1)
    ck = stethoscope.Checkpoints(tmp_path / "ck", every=1, on_signal=None, strict=True)
    with stethoscope.Monitor(tmp_path / "run", model, rank=1, world_size=2, checkpoints=ck) as mon:
        mon.step(1, loss=1.0)
    assert [p.name for p in (tmp_path / "ck" / "rank-00001").iterdir()] == ["step-00000001"]


def test_save_time_is_kept_out_of_step_time(tmp_path, monkeypatch):
    """A save after step 4 and step 9 (a slow disk: 10 s on the Monitor's clock) is recorded as
    `perf/checkpoint_s` with the next step, and that step's `perf/step_time_s` holds only its training,
    so periodic saves never read as periodic stalls of the run."""
    import time as real_time

    from stethoscope.capture import monitor, own_work, pending, timing

    class Clock:  # the Monitor's clock: 1 s per training step, 10 s per save
        now = 1000.0

        def __getattr__(self, name):
            return getattr(real_time, name)

        def perf_counter(self):
            return Clock.now

    for module in (monitor, timing, own_work, pending):  # the step clock, the saves' clock, the flush's clock
        monkeypatch.setattr(module, "time", Clock())
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ck = stethoscope.Checkpoints(tmp_path / "ck", every=5, on_signal=None)
    real_save = ck.save

    def slow_save(*args, **kwargs):
        Clock.now += 10.0
        return real_save(*args, **kwargs)

    monkeypatch.setattr(ck, "save", slow_save)
    with stethoscope.Monitor(tmp_path / "run", model, opt, checkpoints=ck) as mon:
        for step in range(12):
            Clock.now += 1.0
            mon.step(step, loss=1.0)
    saved = sorted(int(p.name.rsplit("-", 1)[-1]) for p in (tmp_path / "ck").iterdir() if p.is_dir())
    with open_run(tmp_path / "run") as r:
        steps, times = r.series("perf/step_time_s")
        ck_steps, ck_times = r.series("perf/checkpoint_s")
    assert ck_steps == [s + 1 for s in saved] and ck_times == [10.0] * len(saved) and saved
    assert steps == list(range(1, 12)) and times == [1.0] * 11
