"""A tiny real training run (an MLP regressing a noisy target on CPU) under automatic recovery, with a
fault that can be injected: `diverge` (the LR blown up x100 for 10 steps), `nan` (a weight turned NaN),
`nan_always` (the NaN comes back on every pass: recovery must give up), `diverge_persist` (the LR blown up
x100 from step FAULT_AT - 25 for 40 steps on every pass: a fault still there after the first restore). The batches are a function of
the step, so skipping one is simply not training on it. `train_lr`: the same MLP without recovery, its LR the
cosine schedule times a factor per step (an LR story: a jump, a blow-up to the end)."""

from __future__ import annotations

import math
from pathlib import Path
from collections.abc import Callable
from typing import Any

import torch

import stethoscope
from stethoscope.act import AlertsConfig, MemoryChannel, RuleConfig

FAULT_AT = 120
BASE_LR = 1e-2


def batch(step: int, n: int = 32) -> tuple[Any, Any]:
    g = torch.Generator().manual_seed(10_000 + step)
    x = torch.randn(n, 8, generator=g)
    return x, torch.sin(x[:, :4]).sum(1, keepdim=True) + 0.5 * torch.randn(n, 1, generator=g)


def lr_at(step: int, steps: int) -> float:
    """Cosine decay to 5%: the end of the run settles near the noise floor, with or without a detour."""
    return BASE_LR * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * step / steps)))


def held_out_loss(model: Any) -> float:
    x, y = batch(-1, 2048)
    with torch.no_grad():
        return torch.nn.functional.mse_loss(model(x), y).item()


def make() -> tuple[Any, Any]:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64), torch.nn.Tanh(),
                                torch.nn.Linear(64, 1))
    return model, torch.optim.Adam(model.parameters(), lr=BASE_LR)


def train(root: Path, fault: str | None = None, steps: int = 500, recovery: Any = None, every: int = 20,
          channel: MemoryChannel | None = None) -> dict[str, Any]:
    """Train; {'final': held-out loss, 'mon': the closed Monitor, 'trained': steps trained, 'stopped': step or None}."""
    model, opt = make()
    ck = stethoscope.Checkpoints(root / "ck", every=every, keep_last=2, on_signal=None)
    alerts = AlertsConfig([channel], RuleConfig(cooldown_s=0)) if channel is not None else False
    recovery = stethoscope.Recovery(patience=15) if recovery is None else recovery or None  # False: off
    trained, stopped = 0, None
    with stethoscope.Monitor(root / "run", model, opt, checkpoints=ck, recovery=recovery, alerts=alerts,
                             flush_interval=0.05) as mon:
        step = 0
        while step < steps:
            if mon.should_skip(step):
                step += 1
                continue
            first_pass = mon.recovery is None or not mon.recovery.rollbacks
            scale = mon.recovery.lr_scale if mon.recovery is not None else 1.0
            blown = (fault == "diverge" and first_pass and FAULT_AT <= step < FAULT_AT + 10) or \
                (fault == "diverge_persist" and FAULT_AT - 25 <= step < FAULT_AT + 15)
            for g in opt.param_groups:
                g["lr"] = lr_at(step, steps) * scale * (100.0 if blown else 1.0)
            if step == FAULT_AT and (fault == "nan_always" or (fault == "nan" and first_pass)):
                with torch.no_grad():
                    model[0].weight[0, 0] = float("nan")
            x, y = batch(step)
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            trained += 1
            ctl = mon.step(step, loss=loss)
            if ctl.stop:
                stopped = step
                break
            step = ctl.resume_step if ctl.rollback else step + 1
    return {"final": held_out_loss(model), "mon": mon, "trained": trained, "stopped": stopped}


def train_lr(path: Path, steps: int, factor: Callable[[int], float], schedule_steps: int | None = None,
             before_step: Callable[[int, Any], None] | None = None, **monitor: Any) -> None:
    """Train `steps` steps into a Monitor at `path` (no recovery; no dashboard unless `monitor` says `serve=`), the
    LR at each step `lr_at(step, schedule_steps or steps) * factor(step)`; `before_step(step, model)`, when given,
    runs after the LR is set (a fault injected into the weights); `monitor`: more of the Monitor's arguments."""
    model, opt = make()
    with stethoscope.Monitor(path, model, opt, **{"serve": False, **monitor}) as mon:
        for step in range(steps):
            for g in opt.param_groups:
                g["lr"] = lr_at(step, schedule_steps or steps) * factor(step)
            if before_step is not None:
                before_step(step, model)
            x, y = batch(step)
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            mon.step(step, loss=loss)
