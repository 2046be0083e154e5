"""Async saves: the host copy holds the state of its step, a tied tensor once, and a module's metadata."""

from __future__ import annotations

import threading
import time

import pytest
import torch

import stethoscope


class Tied(torch.nn.Module):
    """An embedding and an output layer sharing one weight (as GPT-2's do), and a BatchNorm (versioned)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(512, 64)
        self.head = torch.nn.Linear(64, 512, bias=False)
        self.head.weight = self.emb.weight
        self.norm = torch.nn.BatchNorm1d(64)


def _trained() -> tuple[Tied, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = Tied()
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    model.train()
    loss = model.head(model.norm(model.emb(torch.arange(8)))).square().mean()
    loss.backward()
    opt.step()
    return model, opt


def test_async_save_writes_a_tied_tensor_once_and_keeps_module_metadata(tmp_path):
    model, opt = _trained()
    parts = {"model": model, "optimizer": opt}
    asyn = stethoscope.Checkpoints(tmp_path / "async", async_save=True, on_signal=None, strict=True, extra=parts)
    sync = stethoscope.Checkpoints(tmp_path / "sync", on_signal=None, strict=True, extra=parts)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    asyn.save(1)
    with torch.no_grad():
        model.emb.weight.add_(1.0)  # training goes on while the writer thread writes
    sync_path = sync.save(1, wait=True)
    state = asyn.load_latest()
    saved = state["model"]
    assert all(torch.equal(saved[k], v) for k, v in before.items())
    assert saved["emb.weight"].untyped_storage().data_ptr() == saved["head.weight"].untyped_storage().data_ptr()
    size = (state["path"] / "model.pt").stat().st_size
    assert abs(size - (sync_path / "model.pt").stat().st_size) < 4096  # not 128 KiB more: the tied weight once
    assert saved._metadata == model.state_dict()._metadata and saved._metadata["norm"]["version"] == 2
    asyn.close()
    sync.close()


def test_async_saves_reuse_their_host_buffers_and_follow_a_changed_state(tmp_path):
    model, opt = _trained()
    ck = stethoscope.Checkpoints(tmp_path, async_save=True, keep_last=None, on_signal=None, strict=True,
                                 extra={"model": model, "optimizer": opt})
    ck.save(1)
    ck.wait()
    buffers = list(ck._staging._buffers)
    with torch.no_grad():
        model.norm.weight.mul_(3.0)
    ck.save(2)
    ck.wait()
    assert all(a is b for a, b in zip(buffers, ck._staging._buffers)) and len(buffers) == len(ck._staging._buffers)
    model.extra = torch.nn.Linear(3, 5)  # the state grows (a new layer): new buffers where shapes differ
    ck.save(3)
    ck.close()
    for step in (2, 3):
        state = ck.load_latest(before=step)["model"]
        assert torch.equal(state["norm.weight"], model.norm.weight.detach())
    assert torch.equal(ck.load_latest()["model"]["extra.weight"], model.extra.weight.detach())


def _step(model: Tied, opt: torch.optim.Optimizer) -> None:
    """One real training step: the forward changes BatchNorm's running stats, `step()` the weights and the
    moments."""
    opt.zero_grad()
    model.head(model.norm(model.emb(torch.arange(8)))).square().mean().backward()
    opt.step()


def _held_writer(monkeypatch) -> None:
    """The writer thread starts its copies 0.3 s late, so training reaches the next `step()` first (no timing is
    asserted: it only makes the order that a missing wait would get wrong the likely one)."""
    from stethoscope.checkpoint import staging

    settle = staging.HostStaging.settle

    def late(self):
        time.sleep(0.3)
        settle(self)

    monkeypatch.setattr(staging.HostStaging, "settle", late)


def test_overlap_copy_saves_the_state_of_its_step_while_the_next_step_trains(tmp_path, monkeypatch):
    model, opt = _trained()
    ck = stethoscope.Checkpoints(tmp_path, async_save=True, overlap_copy=True, on_signal=None, strict=True,
                                 extra={"model": model, "optimizer": opt})
    _held_writer(monkeypatch)
    want = {"model": {k: v.clone() for k, v in model.state_dict().items()},
            "exp_avg": opt.state[model.emb.weight]["exp_avg"].clone()}
    ck.save(1)
    _step(model, opt)  # the forward runs alongside the copy; step() waits for it
    ck.wait()
    state = ck.load_latest()
    assert all(torch.equal(state["model"][k], v) for k, v in want["model"].items())
    assert torch.equal(state["optimizer"]["state"][0]["exp_avg"], want["exp_avg"])
    assert not torch.equal(model.norm.running_mean, want["model"]["norm.running_mean"])  # training did go on
    ck.close()


def test_a_failed_overlapping_copy_never_holds_training(tmp_path, monkeypatch):
    model, opt = _trained()
    ck = stethoscope.Checkpoints(tmp_path, async_save=True, overlap_copy=True, on_signal=None,
                                 extra={"model": model, "optimizer": opt})
    fused = torch._foreach_copy_

    def failing(*args, **kwargs):
        if threading.current_thread().name == "stethoscope-checkpoint":
            raise RuntimeError("copy failed")
        return fused(*args, **kwargs)

    monkeypatch.setattr(torch, "_foreach_copy_", failing)
    _held_writer(monkeypatch)
    ck.save(1)
    _step(model, opt)  # returns: the writer's failure released the step
    ck.wait()
    assert ck.errors == 1 and ck.list() == []
    monkeypatch.setattr(torch, "_foreach_copy_", fused)
    assert ck.save(2, wait=True) is not None and ck.list()[-1].step == 2
    ck.close()


def test_overlap_copy_without_async_save_is_refused(tmp_path):
    with pytest.raises(ValueError, match="overlap_copy=True needs async_save=True"):
        stethoscope.Checkpoints(tmp_path, overlap_copy=True, on_signal=None)
