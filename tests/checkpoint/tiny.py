"""A tiny CPU training run with full state (model, Adam, LR schedule, RNG-driven noise and dropout,
a data position), used by the checkpoint tests in-process and in forked children."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

import stethoscope


class Position:
    """The data position: which batch comes next (what a stateful sampler would save)."""

    def __init__(self) -> None:
        self.consumed = 0

    def state_dict(self) -> dict[str, Any]:
        return {"consumed": self.consumed}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.consumed = state["consumed"]


def make(width: int = 32, seed: int = 0) -> tuple[Any, Any, Any, Position]:
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, width), torch.nn.ReLU(), torch.nn.Dropout(0.1),
                                torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=7, gamma=0.8)
    return model, opt, sched, Position()


def batch(pos: Position) -> tuple[Any, Any]:
    g = torch.Generator().manual_seed(1000 + pos.consumed)
    x = torch.randn(16, 8, generator=g)
    pos.consumed += 1
    return x, x.sum(1, keepdim=True)


def train_step(model: Any, opt: Any, sched: Any, pos: Position) -> float:
    x, y = batch(pos)
    x = x + 0.01 * torch.randn_like(x) + float(np.random.rand()) * 1e-3 + random.random() * 1e-3  # every RNG counts
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    return loss.item()


def run(run_dir: Path, ckpt_dir: Path, steps: int, every: int = 5, width: int = 32, seed: int = 0,
        resume: bool = True, **options: Any) -> dict[int, float]:
    """Train to `steps` (resuming from the newest verified checkpoint); {step: loss} of the steps run."""
    model, opt, sched, pos = make(width, seed)
    ckpt = stethoscope.Checkpoints(ckpt_dir, every=every, scheduler=sched, data=pos, **options)
    losses = {}
    with stethoscope.Monitor(run_dir, model, opt, checkpoints=ckpt, resume=True, flush_interval=0.2) as mon:
        start = mon.resume() if resume else 0
        for step in range(start, steps):
            losses[step] = train_step(model, opt, sched, pos)
            mon.step(step, loss=losses[step])
    return losses
