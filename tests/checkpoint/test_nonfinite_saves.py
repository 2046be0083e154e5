"""A scheduled save at a non-finite loss waits for a finite one (user-trial-3): a run whose weights went NaN
used to save them on schedule, and `keep_last` rotated every good checkpoint out, so `mon.resume()` loaded
the NaN weights. Real torch training, real checkpoints and store."""

from __future__ import annotations

import torch

import stethoscope
from stethoscope.checkpoint import disk
from stethoscope.store.query import open_run

torch.set_num_threads(1)


def _train(run, steps, nan_at=None, bad_losses=(), start=None):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    ckpt = stethoscope.Checkpoints(run / "ckpt", every=5, keep_last=2)
    mon = stethoscope.Monitor(str(run), model=model, optimizer=opt, checkpoints=ckpt, resume=True)
    first = mon.resume()
    for step in range(first, steps):
        x = torch.randn(16, 8, generator=torch.Generator().manual_seed(step))
        if step == nan_at:
            with torch.no_grad():
                model[0].weight[0, 0] = float("nan")
        loss = torch.nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
        opt.zero_grad()
        loss.backward()
        opt.step()
        mon.step(step, loss=float("inf") if step in bad_losses else loss)
    mon.close()
    return first, model


def _events(run):
    with open_run(str(run)) as r:
        return r.query("SELECT step, kind, message FROM events WHERE source = 'checkpoint' ORDER BY id")[1]


def test_nan_weights_are_never_saved_on_schedule_and_resume_gets_good_ones(tmp_path):
    run = tmp_path / "r"
    _train(run, 40, nan_at=22)
    assert [i.step for i in disk.catalogue(run / "ckpt")] == [15, 20]  # not 25..35 with NaN weights
    deferred = [e for e in _events(run) if e[1] == "checkpoint_deferred"]
    assert len(deferred) == 1 and deferred[0][0] == 25 and "non-finite" in deferred[0][2]
    first, model = _train(run, 42)
    assert first == 21
    assert all(bool(torch.isfinite(p).all()) for p in model.parameters())


def test_a_save_skipped_at_one_bad_loss_is_made_at_the_next_finite_step(tmp_path):
    run = tmp_path / "r"
    _train(run, 14, bad_losses=(10,))
    assert [i.step for i in disk.catalogue(run / "ckpt")] == [5, 11]
    saved = [e for e in _events(run) if e[1] == "checkpoint"]
    assert "deferred from step 10" in saved[-1][2]
