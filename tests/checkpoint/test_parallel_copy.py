"""The async save's host copy spread over threads (one thread's memcpy held the training thread for 73% of
a sync save on a 16-core GPU host): every byte lands where a single `_foreach_copy_` puts it."""

from __future__ import annotations

import threading

import pytest
import torch

import stethoscope
from stethoscope.checkpoint import staging


@pytest.fixture
def small_slices(monkeypatch):
    """Thresholds scaled down so that a test-sized state takes the threaded path (slices of 4 KiB, 3 threads)."""
    monkeypatch.setattr(staging, "_SLICE", 4096)
    monkeypatch.setattr(staging, "_MIN_PER_THREAD", 1024)
    monkeypatch.setattr(staging, "_threads", lambda: 3)
    started = []
    real = threading.Thread.start

    def start(self):
        started.append(self.name)
        real(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    return started


def test_threaded_copy_equals_the_source_for_every_kind_of_tensor(small_slices):
    torch.manual_seed(0)
    src = [torch.randn(3000), torch.randn(64, 48).t(), torch.arange(5000, dtype=torch.int64),
           torch.randn(7).to(torch.bfloat16), torch.zeros(0), torch.randn(40, 40)[::2]]
    dst = [torch.empty(t.shape, dtype=t.dtype) for t in src]
    staging.parallel_copy(torch, dst, src)
    assert all(torch.equal(d, s) for d, s in zip(dst, src))
    assert small_slices.count("stethoscope-copy") == 2  # two helper threads beside the calling one


def test_a_failing_slice_raises_on_the_calling_thread(small_slices):
    src = [torch.randn(4000), torch.randn(4000)]
    dst = [torch.empty(4000), torch.empty(3)]  # a wrong shape: _foreach_copy_ refuses it on some thread
    with pytest.raises(RuntimeError):
        staging.parallel_copy(torch, dst, src)


def test_an_async_save_through_threads_loads_back_bitwise(tmp_path, small_slices):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.Linear(256, 64))
    opt = torch.optim.Adam(model.parameters())
    model(torch.randn(4, 64)).square().mean().backward()
    opt.step()
    ck = stethoscope.Checkpoints(tmp_path, async_save=True, keep_last=None, on_signal=None, strict=True,
                                 extra={"model": model, "optimizer": opt})
    before = {k: v.clone() for k, v in model.state_dict().items()}
    ck.save(1)
    with torch.no_grad():  # training goes on right after the call returns: the copy must be done by then
        for p in model.parameters():
            p.add_(1.0)
    ck.close()
    assert "stethoscope-copy" in small_slices
    state = ck.load_latest()
    for name, value in before.items():
        assert torch.equal(state["model"][name], value)
    assert state["optimizer"]["state"][0]["exp_avg"].shape == model[0].weight.shape
