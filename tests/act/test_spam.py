"""SPAM on a real tiny run: it clips injected gradient spikes and trains like AdamW when there is none."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from tests.act.recovery_loop import batch, held_out_loss
from tests.conftest import REPO

SPIKES = (150, 151, 152)


def _train(make_opt, spike: bool, steps: int = 300) -> tuple[float, dict[int, int], object]:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64), torch.nn.Tanh(),
                                torch.nn.Linear(64, 1))
    opt = make_opt(model.parameters())
    clipped = {}
    for step in range(steps):
        x, y = batch(step)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        if spike and step in SPIKES:  # a gradient spike: every entry x1000 (a bad batch, an overflow)
            for p in model.parameters():
                p.grad.mul_(1e3)
        opt.step()
        clipped[step] = getattr(opt, "last_clipped", 0)
    return held_out_loss(model), clipped, opt


def test_spam_clips_injected_spikes_and_trains_like_adamw_without_them():
    from stethoscope.act.spam import SPAM

    def adamw(ps):
        return torch.optim.AdamW(ps, lr=3e-3, weight_decay=0.0)

    def spam(ps):
        return SPAM(ps, lr=3e-3, reset_every=100, warmup=20)

    n_params = sum(p.numel() for p in torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.Linear(64, 64),
                                                          torch.nn.Linear(64, 1)).parameters())
    adamw_clean, _, _ = _train(adamw, False)
    adamw_spiked, _, _ = _train(adamw, True)
    spam_clean, quiet, _ = _train(spam, False)
    spam_spiked, clipped, opt = _train(spam, True)
    assert abs(spam_clean - adamw_clean) / adamw_clean < 0.10, (spam_clean, adamw_clean)  # comparable
    assert all(clipped[s] > 0.9 * n_params for s in SPIKES)  # nearly every entry of a x1000 gradient clipped
    assert sum(quiet[s] for s in range(140, 160)) < 0.01 * n_params * 20  # a normal gradient rarely is
    assert adamw_spiked > 1.2 * adamw_clean  # the spikes hurt AdamW (its second moment stays inflated)
    assert spam_spiked < 1.1 * adamw_clean, (spam_spiked, adamw_clean)  # ... and barely touch SPAM
    assert opt.resets == 2 and opt.clipped >= sum(clipped.values())


def test_spam_state_round_trips_and_bad_settings_are_refused():
    from stethoscope.act.spam import SPAM

    model = torch.nn.Linear(3, 1)
    opt = SPAM(model.parameters(), lr=1e-2, reset_every=2)
    for _ in range(3):
        model(torch.ones(4, 3)).sum().backward()
        opt.step()
    again = SPAM(model.parameters(), lr=1e-2, reset_every=2)
    again.load_state_dict(opt.state_dict())
    assert (again.steps, again.resets, again.clipped) == (opt.steps, opt.resets, opt.clipped) == (3, 1, opt.clipped)
    torch.optim.lr_scheduler.StepLR(again, 1)  # a real torch optimizer
    for bad in ({"lr": -1}, {"theta": 0}, {"reset_every": 0}, {"betas": (1.0, 0.9)}):
        with pytest.raises(ValueError, match="SPAM"):
            SPAM(model.parameters(), **bad)


def test_importing_spam_loads_no_torch():
    code = "import sys, stethoscope.act.spam; assert 'torch' not in sys.modules; print('ok')"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert res.stdout.strip() == "ok", res.stderr
