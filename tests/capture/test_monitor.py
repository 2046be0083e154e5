"""The Monitor on a real tiny torch model (CPU), with asserted values."""

from __future__ import annotations

import gc
import json
import math
import time

import pytest

torch = pytest.importorskip("torch")

from stethoscope import Monitor  # noqa: E402
from stethoscope import records as R  # noqa: E402
from stethoscope.errors import InternalError  # noqa: E402
from stethoscope.store.query import open_run  # noqa: E402
from stethoscope.testing import FakeDeviceMemory  # noqa: E402


def _model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))


def _batch(i):
    g = torch.Generator().manual_seed(i)
    x = torch.randn(32, 8, generator=g)
    return x, x.sum(1, keepdim=True)


def _loss(model, i):
    x, y = _batch(i)
    return ((model(x) - y) ** 2).mean()


def test_grad_norm_equals_total_norm_of_the_same_grads(tmp_path):
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    expected = {}
    with Monitor(tmp_path, model=model, optimizer=opt, strict=True) as mon:
        for i in range(12):
            loss = _loss(model, i)
            loss.backward()
            opt.step()
            expected[i] = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()]).item()
            opt.zero_grad()
            mon.step(i, loss=loss)
    with open_run(tmp_path) as r:
        steps, norms = r.series(R.GRAD_NORM)
        assert steps == list(range(12))
        assert norms == pytest.approx([expected[i] for i in steps], rel=1e-5)
        _, losses = r.series(R.LOSS)
        assert losses[0] == pytest.approx(_loss(_model(), 0).item(), rel=1e-6)


def test_lr_of_every_group_details_and_layer_norms(tmp_path):
    model = _model()
    opt = torch.optim.AdamW([{"params": model[0].parameters(), "lr": 1e-3},
                             {"params": model[2].parameters(), "lr": 5e-4}])
    with Monitor(tmp_path, model=model, optimizer=opt, strict=True, grad_norms="layers", layers_every=5,
                 details_every=5) as mon:
        for i in range(11):
            loss = _loss(model, i)
            loss.backward()
            opt.step()
            opt.zero_grad()
            mon.step(i, loss=loss)
    with open_run(tmp_path) as r:
        assert r.series(R.LR)[1] == pytest.approx([1e-3] * 11)
        assert r.series(f"{R.LR}/group1")[1] == pytest.approx([5e-4] * 11)
        assert r.series("grad/norm/0.weight")[0] == [0, 5, 10]
        assert r.series("grad/norm/2.bias")[0] == [0, 5, 10]
        steps, ratios = r.series(R.UPDATE_RATIO)
        assert steps == [0, 5, 10] and all(0 < x < 0.1 for x in ratios)
        assert r.series(R.PARAM_NORM)[0] == [0, 5, 10]
        zero_steps, zero_frac = r.series(R.GRAD_ZERO_FRAC)
        assert zero_steps == [0, 5, 10] and all(0 <= z < 1 for z in zero_frac)


def test_user_grad_norm_is_reused_and_clip_coefficient_recorded(tmp_path):
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    returned = []
    with Monitor(tmp_path, model=model, optimizer=opt, max_grad_norm=0.5, strict=True) as mon:
        for i in range(6):
            loss = _loss(model, i)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            returned.append(norm.item())
            opt.step()
            opt.zero_grad()
            mon.step(i, loss=loss, grad_norm=norm)
        assert mon._grads.skip_global  # the hook stopped computing its own norm
    with open_run(tmp_path) as r:
        assert r.series(R.GRAD_NORM)[1] == pytest.approx(returned)
        coef = r.series(R.GRAD_CLIP_COEF)[1]
        assert coef == pytest.approx([min(1.0, 0.5 / (n + 1e-6)) for n in returned])
        assert min(coef) < 1.0


def test_timing_tokens_and_data_wait(tmp_path):
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    t_start = time.perf_counter()
    with Monitor(tmp_path, model=model, optimizer=opt, tokens_per_step=4096, samples_per_step=32,
                 strict=True) as mon:
        for i in range(10):
            time.sleep(0.02)  # the "data loader"
            loss = _loss(model, i)
            loss.backward()
            opt.step()
            opt.zero_grad()
            mon.step(i, loss=loss)
    wall = time.perf_counter() - t_start
    with open_run(tmp_path) as r:
        steps, dt = r.series(R.STEP_TIME)
        _, tps = r.series(R.TOKENS_PER_S)
        _, sps = r.series(R.SAMPLES_PER_S)
        _, wait = r.series(R.DATA_WAIT)
        assert steps == list(range(1, 10))
        assert tps == pytest.approx([4096 / d for d in dt])
        assert sps == pytest.approx([32 / d for d in dt])
        assert sum(dt) <= wall and sum(dt) >= 9 * 0.02
        assert all(0.018 <= w <= d for w, d in zip(wait, dt))
        # tokens/s is consistent with the steps and the wall time
        assert 9 * 4096 / sum(dt) == pytest.approx(9 / sum(1 / x for x in tps), rel=1e-6)
        assert r.series(R.TFLOPS)[0] == steps  # the model's FLOPs per token are known (6N)


def test_mfu_with_fake_gpu_memory_loss_scale_and_gc(tmp_path):
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    fake = FakeDeviceMemory(grow_per_sample=1 << 20)
    n = sum(p.numel() for p in model.parameters() if p.dim() >= 2)  # matrices multiply; biases only add
    with Monitor(tmp_path, model=model, optimizer=opt, tokens_per_step=1000, scaler=scaler, peak_flops=1e12,
                 device_memory=fake, system_every=0.001, log_every=1, strict=True) as mon:
        for i in range(5):
            loss = _loss(model, i)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
            if i == 3:
                gc.collect()
            mon.step(i, loss=loss)
            time.sleep(0.002)
    with open_run(tmp_path) as r:
        _, tps = r.series(R.TOKENS_PER_S)
        _, mfu = r.series(R.MFU)
        assert mfu == pytest.approx([t * 6 * n / 1e12 for t in tps])
        assert r.series(R.CUDA_TOTAL)[1][0] == pytest.approx(80.0)
        alloc = r.series(R.CUDA_ALLOCATED)[1]
        assert alloc[0] > 2.0 and alloc == sorted(alloc) and len(alloc) >= 3
        assert r.series(f"{R.CUDA_RESERVED}/cuda0")[1][0] == pytest.approx(3.0)
        assert r.series(R.LOSS_SCALE)[1][-1] == scaler.get_scale()
        steps, pauses = r.series(R.GC_PAUSE)
        assert pauses[steps.index(3)] > 0
        assert r.series(R.RSS)[1][0] > 0.01


def test_nan_loss_and_batch_ids_are_recorded(tmp_path):
    with Monitor(tmp_path, strict=True) as mon:
        for i in range(5):
            loss = torch.tensor(float("nan") if i == 3 else 1.0 / (i + 1))
            ids = torch.arange(4 * i, 4 * i + 4) if i != 2 else ["doc-a", "doc-b"]
            mon.step(i, loss=loss, batch_ids=ids.reshape(2, 2) if i == 4 else ids)
    with open_run(tmp_path) as r:
        losses = r.series(R.LOSS)[1]
        assert math.isnan(losses[3]) and losses[4] == pytest.approx(0.2)
        ids = {s: json.loads(v) for s, v in r.query("SELECT step, ids FROM batches")[1]}
        assert ids == {0: [0, 1, 2, 3], 1: [4, 5, 6, 7], 2: ["doc-a", "doc-b"], 3: [12, 13, 14, 15],
                       4: [16, 17, 18, 19]}


def test_run_metadata_and_exit_status(tmp_path):
    cfg = {"lr": 3e-4, "layers": 2}
    with pytest.raises(ValueError):
        with Monitor(tmp_path, config=cfg) as mon:
            mon.step(0, loss=1.0)
            raise ValueError("boom in training")
    with open_run(tmp_path) as r:
        meta = r.meta()
    assert json.loads(meta["config"]) == cfg
    assert meta["status"] == "failed: ValueError: boom in training"
    for key in ("argv", "host", "python", "torch", "world_size", "rank", "start_time", "end_time", "stethoscope"):
        assert key in meta, key
    run_json = json.loads((tmp_path / "run.json").read_text())
    assert run_json["status"].startswith("failed") and run_json["config"] == cfg


def test_rank_from_environment_writes_its_own_file(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    with Monitor(tmp_path) as mon:
        mon.step(0, loss=2.0)
    assert (tmp_path / "rank-00003.sqlite").exists()
    assert not (tmp_path / "run.json").exists()  # run.json is rank 0's
    with open_run(tmp_path) as r:
        assert r.ranks == [3]
        assert r.meta()["world_size"] == "4"


def test_a_failure_inside_stethoscope_never_crashes_the_run(tmp_path, caplog):
    mon = Monitor(tmp_path)
    mon.step(0, loss="not a number")  # float("not a number") fails inside
    mon.step(1, loss=1.0)
    assert mon.errors == 1
    mon.close()
    with open_run(tmp_path) as r:
        assert r.series(R.LOSS) == ([1], [1.0])
    strict = Monitor(tmp_path / "strict", strict=True)
    with pytest.raises(InternalError):
        strict.step(0, loss="not a number")
    strict.close()


def test_close_is_idempotent_and_flush_is_durable(tmp_path):
    mon = Monitor(tmp_path, flush_interval=30.0, log_every=1000)
    for i in range(50):
        mon.step(i, loss=float(i))
    assert mon.flush()
    with open_run(tmp_path) as r:
        assert len(r.series(R.LOSS)[0]) == 50
    mon.close()
    mon.close()


def _train_counted(model, opt, steps, clip, mon=None):
    from stethoscope.testing import count_host_reads

    with count_host_reads() as reads:
        for i in range(steps):
            loss = _loss(model, i)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0) if clip else None
            opt.step()
            opt.zero_grad()
            if mon is not None:
                mon.step(i, loss=loss, grad_norm=norm, batch_ids=torch.arange(i, i + 32))
    return reads


@pytest.mark.parametrize("opts", [{}, {"grad_norms": "layers", "layers_every": 1, "details_every": 1},
                                  {"clip": True}], ids=["defaults", "layers+details", "user-clip-norm"])
def test_no_host_sync_per_step_one_transfer_per_flush(tmp_path, opts):
    """On a GPU every host read stalls the device: the Monitor adds none per step, one per flush."""
    from stethoscope.testing import count_host_reads

    opts = dict(opts)
    clip = opts.pop("clip", False)
    model = _model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)  # Adam reads its CPU step counters itself
    plain = _model()
    baseline = _train_counted(plain, torch.optim.AdamW(plain.parameters(), lr=1e-3), 15, clip)
    with Monitor(tmp_path, model=model, optimizer=opt, tokens_per_step=32, flush_interval=3600.0,
                 log_every=10_000, strict=True, **opts) as mon:
        mon.flush()
        monitored = _train_counted(model, opt, 15, clip, mon)
        with count_host_reads() as at_flush:
            mon.flush()
    assert monitored.by_op == baseline.by_op
    assert at_flush.by_op == {"tolist": 2}  # the 15 steps' values in one transfer, their batch ids in one
    with open_run(tmp_path) as r:
        assert r.series(R.GRAD_NORM)[0] == list(range(15))
        assert len(r.series(R.LOSS)[0]) == 15


def test_host_read_counter_sees_the_per_parameter_callback():
    from stethoscope.testing import count_host_reads

    model = _model()
    _loss(model, 0).backward()
    with count_host_reads() as reads:
        norms = [p.grad.norm().item() for p in model.parameters()]
    assert reads.count == len(norms) == 4


def _train_steps(mon, model, opt, steps):
    for i in steps:
        loss = _loss(model, i)
        loss.backward()
        opt.step()
        opt.zero_grad()
        mon.step(i, loss=loss)


def test_run_dir_deleted_under_a_live_run_is_logged_and_counted_never_raised(tmp_path, caplog):
    import shutil

    run = tmp_path / "run"
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    mon = Monitor(run, model=model, optimizer=opt, flush_interval=0.1, log_every=5)
    _train_steps(mon, model, opt, range(10))
    assert mon.flush()
    shutil.rmtree(run)
    _train_steps(mon, model, opt, range(10, 30))  # the loop goes on; nothing here may raise
    mon.flush()
    with caplog.at_level("WARNING", logger="stethoscope"):
        mon.close()
    assert mon.steps == 30 and mon.last_step == 29
    assert mon.internal_errors >= 1
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("run.json" in m and "run directory is gone" in m for m in warned), warned
    assert not (run / "run.json.tmp").exists() and not run.exists()  # nothing half-written, no dir re-made
    mon.close()  # still idempotent


def test_run_dir_deleted_raises_only_when_strict(tmp_path):
    import shutil

    mon = Monitor(tmp_path / "run", strict=True)
    mon.step(0, loss=1.0)
    shutil.rmtree(tmp_path / "run")
    with pytest.raises(InternalError, match="run.json"):
        mon.close()


def test_atexit_with_the_run_dir_deleted_exits_cleanly(tmp_path):
    import subprocess
    import sys

    from tests.conftest import REPO

    script = (
        "import shutil, sys, torch\n"
        "from stethoscope import Monitor\n"
        "model = torch.nn.Linear(4, 1)\n"
        "mon = Monitor(sys.argv[1], model=model, flush_interval=0.1)\n"
        "for i in range(20):\n"
        "    mon.step(i, loss=model(torch.ones(2, 4)).pow(2).mean())\n"
        "shutil.rmtree(sys.argv[1])\n"
        "print('trained')\n"  # no close(): the atexit path closes the run
    )
    res = subprocess.run([sys.executable, "-c", script, str(tmp_path / "run")], capture_output=True, text=True,
                         timeout=120, cwd=REPO, env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "trained"
    assert "run directory is gone" in res.stderr and "internal_errors" in res.stderr


def test_full_disk_is_counted_and_recording_resumes_when_space_returns(tmp_path, caplog):
    from stethoscope.store.db import RunStore, rank_path
    from stethoscope.testing import FullDisk

    disk = FullDisk(RunStore(rank_path(tmp_path, 0)))
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    mon = Monitor(tmp_path, model=model, optimizer=opt, store=disk, flush_interval=0.1, log_every=5)
    _train_steps(mon, model, opt, range(10))
    assert mon.flush()
    disk.full = True
    with caplog.at_level("WARNING", logger="stethoscope"):
        _train_steps(mon, model, opt, range(10, 20))
        mon.flush()
    assert disk.refused >= 1 and mon.internal_errors >= 1
    assert any("writer failed" in r.getMessage() for r in caplog.records)
    disk.full = False
    _train_steps(mon, model, opt, range(20, 30))  # step() after the failure keeps working
    mon.close()
    with open_run(tmp_path) as r:
        steps, _ = r.series(R.LOSS)
        _, counts = r.series(R.INTERNAL_ERRORS)
        meta = r.meta()
    assert steps == list(range(10)) + list(range(20, 30))  # what the full disk refused is lost, and counted
    assert counts[-1] == mon.internal_errors
    assert meta["status"] == "completed" and int(meta["internal_errors"]) >= 1


def test_full_disk_while_closing_never_raises(tmp_path):
    from stethoscope.store.db import RunStore, rank_path
    from stethoscope.testing import FullDisk

    disk = FullDisk(RunStore(rank_path(tmp_path, 0)))
    mon = Monitor(tmp_path, store=disk, flush_interval=0.1)
    for i in range(5):
        mon.step(i, loss=float(i))
    disk.full = True
    mon.close()
    assert disk.refused >= 2  # the last points and the end-of-run metadata
    assert mon.internal_errors >= 2
    assert json.loads((tmp_path / "run.json").read_text())["status"] == "completed"


@pytest.mark.parametrize("grad_norms", ["global", "off"])
def test_the_lr_recorded_is_the_one_each_update_used_wherever_the_scheduler_steps(tmp_path, grad_norms):
    """A loop that steps its scheduler before `mon.step()` (read then, the LR would be the next step's) and one
    that steps it after record the same LRs: those `optimizer.step()` used, noted by a pre-hook."""
    recorded = {}
    for order in ("sched first", "monitor first"):
        model = _model()
        opt = torch.optim.SGD([{"params": model[0].parameters(), "lr": 1.0},
                               {"params": model[2].parameters(), "lr": 0.1}])
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
        run = tmp_path / order.replace(" ", "-")
        with Monitor(run, model=model, optimizer=opt, strict=True, grad_norms=grad_norms) as mon:
            for i in range(6):
                _loss(model, i).backward()
                opt.step()
                opt.zero_grad()
                if order == "sched first":
                    sched.step()
                mon.step(i, loss=1.0)
                if order == "monitor first":
                    sched.step()
            mon.step(6, loss=1.0)  # no optimizer.step since the last call: the groups' LR now
        with open_run(run) as r:
            recorded[order] = (r.series(R.LR), r.series(f"{R.LR}/group1")[1])
    steps, lrs = recorded["sched first"][0]
    assert steps == list(range(7)) and lrs == [1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625]
    assert recorded["sched first"] == recorded["monitor first"]
    assert recorded["sched first"][1] == pytest.approx([lr / 10 for lr in lrs])
