"""What every library's generator shares: the data, the fault plan, the injector its hooks call, the labels.

A run is one (library, fault, seed). The library trains a tiny MLP classifier on data drawn from a
random teacher network; the fault is injected by the library's own callback/hook API calling
`Injector.before_step` (step-logged libraries: with the library's own step number) or
`Injector.before_epoch` + `Injector.before_batch` (libraries whose console prints one line per epoch:
with the epoch number as the log prints it). The labels are computed from the run itself: the step
(as the log numbers it) where the fault was injected, and, for the overfitting run, the logged eval
minimum the library's own hook saw.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

FAULTS = ("healthy", "nan", "lr_jump", "frozen", "stall", "slowdown", "overfit")
# The split is fixed before any scoring. Seeds 0-1 were the first development set and 2-3 its held-out
# set; once 2-3 had been scored twice they were spent, so they joined development and seeds 4-5,
# generated later, were the held-out set. 4-5 were scored once and their misses read, so they joined
# development too; seeds 6-7, generated before any tuning on 4-5, are the held-out set. 6-7 were scored
# (looked at); seeds 8-9 ("heldout2"), generated before detect-3's tuning (issue 26), were scored once and then
# looked at; seeds 10-11 ("heldout3"), generated before detect-5's tuning, were scored once at its end and looked at;
# seeds 12-13 ("heldout4") were scored once in session 7 and looked at; seeds 14-15 ("heldout5") were scored once in
# session 8 and looked at; seeds 16-17 ("heldout6") were scored once in
# session 9 and looked at; seeds 18-19 ("heldout7") were scored once in session 10 and looked at; seeds 20-21
# ("heldout8") were scored once in session 11 and looked at; seeds 22-23 ("heldout9"), generated at the start of
# session 12 before any change, are the fresh held-out set.
SPLITS = {"dev": (0, 1, 2, 3, 4, 5), "heldout": (6, 7), "heldout2": (8, 9), "heldout3": (10, 11), "heldout4": (12, 13), "heldout5": (14, 15), "heldout6": (16, 17), "heldout7": (18, 19), "heldout8": (20, 21), "heldout9": (22, 23)}
LR_FACTOR = 100.0  # the LR jump
STALL_EVERY, STALL_S = 6, 0.15  # a data-loader stall: one slow fetch every few batches
SLOWDOWN_S = 0.0006  # per step since the onset: each step slower than the one before
EPOCH_STALL_EVERY, EPOCH_SLOWDOWN_S = 16, 0.001  # the same per batch, for one-line-per-epoch logs


@dataclass
class Plan:
    library: str
    fault: str
    seed: int
    onset: int | None = None  # the step (log numbering) the fault is injected at
    observed: dict[str, Any] = field(default_factory=dict)  # what the library's hooks saw: evals, losses

    @property
    def split(self) -> str:
        return next(k for k, seeds in SPLITS.items() if self.seed in seeds)

    @property
    def name(self) -> str:
        return f"{self.library}-{self.fault}-s{self.seed}"


def onset_for(plan: Plan, total: int) -> int | None:
    """Where the fault goes: between 35% and 65% of the run, drawn from the seed."""
    if plan.fault in ("healthy", "overfit"):
        return None
    g = torch.Generator().manual_seed(1000 * plan.seed + FAULTS.index(plan.fault))
    return int(total * (0.35 + 0.3 * torch.rand((), generator=g).item()))  # host sync: a CPU scalar


def data(seed: int, n: int, noise: float = 0.1, dim: int = 16, classes: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    """Samples labelled by a fixed random teacher (the same teacher for every seed), `noise` of labels flipped."""
    teacher = torch.nn.Sequential(torch.nn.Linear(dim, 32), torch.nn.Tanh(), torch.nn.Linear(32, classes))
    torch.manual_seed(12345)
    for p in teacher.parameters():
        torch.nn.init.normal_(p, std=1.0)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, dim, generator=g)
    with torch.no_grad():
        y = teacher(x).argmax(1)
    flip = torch.rand(n, generator=g) < noise
    y[flip] = torch.randint(0, classes, (int(flip.sum()),), generator=g)
    return x, y


def splits(plan: Plan, n_train: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Train and validation data of a run: a tiny noisier train set for the overfitting fault."""
    overfit = plan.fault == "overfit"
    noise = 0.3 if overfit else 0.1
    x, y = data(plan.seed, 64 if overfit else n_train, noise=noise)
    vx, vy = data(plan.seed + 100, 512, noise=noise)
    return x, y, vx, vy


def model(hidden: int = 64, dim: int = 16, classes: int = 4) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(dim, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden),
                               torch.nn.ReLU(), torch.nn.Linear(hidden, classes))


class Injector:
    """The fault, applied from inside a library's hook. `params` and `optimizer` are the live ones."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.epoch_mode = False
        self.active = False
        self.since = 0

    def before_step(self, step: int, params: Any = None, optimizer: Any = None, scheduler: Any = None) -> None:
        """Called by a per-step hook with the number the log gives the step about to run."""
        p = self.plan
        if p.onset is None or step < p.onset:
            return
        if step == p.onset:
            self._start(params, optimizer, scheduler)
        self._slow(step - p.onset)

    def before_epoch(self, epoch: int, params: Any = None, optimizer: Any = None, scheduler: Any = None) -> None:
        """Called by a per-epoch hook with the epoch number as the log prints it."""
        self.epoch_mode = True
        if self.plan.onset is not None and epoch == self.plan.onset:
            self._start(params, optimizer, scheduler)
        self.since = epoch - self.plan.onset if self.plan.onset is not None and epoch >= self.plan.onset else -1

    def before_batch(self, batch: int) -> None:
        """Per-batch part of an epoch-mode fault: the stall or the slowdown inside the faulty epochs."""
        if self.since < 0:
            return
        if self.plan.fault == "slowdown":  # each faulty epoch a little slower than the one before
            time.sleep(EPOCH_SLOWDOWN_S * (self.since + 1))
        elif self.plan.fault == "stall" and batch % EPOCH_STALL_EVERY == 0:
            time.sleep(STALL_S)

    def _start(self, params: Any, optimizer: Any, scheduler: Any) -> None:
        self.active = True
        kind = self.plan.fault
        if kind == "nan":
            with torch.no_grad():
                first = next(iter(params))
                first.view(-1)[0] = float("nan")  # a NaN weight
        elif kind == "lr_jump":
            if callable(optimizer):  # a library's own optimizer (Keras): it scales its LR itself
                optimizer(LR_FACTOR)
            for group in getattr(optimizer, "param_groups", []):
                group["lr"] *= LR_FACTOR
            if scheduler is not None and hasattr(scheduler, "base_lrs"):
                scheduler.base_lrs = [lr * LR_FACTOR for lr in scheduler.base_lrs]
        elif kind == "frozen":
            for q in params:  # the weights stop moving: every gradient is zero from here on
                q.register_hook(torch.zeros_like)

    def _slow(self, k: int) -> None:
        if self.plan.fault == "stall" and k % STALL_EVERY == 0:
            time.sleep(STALL_S)
        elif self.plan.fault == "slowdown":
            time.sleep(SLOWDOWN_S * k)


@contextmanager
def captured(path: Path) -> Iterator[None]:
    """Everything written to fd 1 and 2 (print, logging, tqdm, C code) goes to `path`, as the console shows it."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(path, "wb") as fh:
        os.dup2(fh.fileno(), 1)
        os.dup2(fh.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def labels(plan: Plan, shows: set[str], at: Callable[[str, int], int] | None = None) -> dict[str, Any]:
    """The labels of a run, from what was injected and what the library's hooks saw.

    `shows`: what the log prints ("lr", "time", "eval"); a time is a measured step or epoch time, not a
    progress bar's rate (tqdm redraws an exponentially smoothed rate on a 0.1 s clock: some 30 of these
    tiny steps, coarser than the scoring's tolerance). `at(kind, n)`: the log's own number for the start
    ("onset") or the end ("end") of the library's step or epoch n (Keras' console counts batches across
    epochs, its CSV epochs from 0); the identity where the log numbers steps as the hooks do.
    Rules fixed before scoring:
    * nan: `nan` at the onset.   * frozen: `plateau` at the onset.
    * lr_jump: `lr_schedule` at the onset where the log shows the LR; `divergence` at the onset when the
      run lost at least half of what it had learned and did not get it back (`diverged`), or a loss is
      non-finite (then also `nan` at the first non-finite one). Spikes after the onset unscored.
    * stall / slowdown: `throughput_drop` at the onset where the log shows a time; throughput before the
      onset unscored (a shared machine's jitter).
    * overfitting (every run, an "overfit" run's tiny dataset or not): `overfitting` at the logged eval
      minimum when the last eval is 2% above it; on a run whose fault changes the curve (nan, lr_jump,
      frozen) only the evals before the onset count.
    * healthy: `healthy` when no other label holds. Throughput is unscored on every run without an
      injected slowdown.
    """
    out: dict[str, Any] = {"labels": [], "unscored": [], "unscored_spans": []}
    lab = out["labels"]
    at = at or (lambda kind, n: n)
    f, s = plan.fault, (None if plan.onset is None else at("onset", plan.onset))
    if f == "healthy":
        lab.append({"type": "healthy", "step": None})
    elif f == "nan":
        lab.append({"type": "nan", "step": s})
    elif f == "frozen":
        lab.append({"type": "plateau", "step": s})
    elif f == "lr_jump":
        _lr_jump_labels(plan, shows, lab, out["unscored_spans"], at)
    elif f in ("stall", "slowdown") and "time" in shows:
        lab.append({"type": "throughput_drop", "step": s})
        out["unscored_spans"].append({"type": "throughput_drop", "from": -1, "to": s - 1})
    # overfitting wherever the run overfit (an "overfit" run's tiny dataset, but also a long healthy run):
    # judged on the evals before a fault that changes the curve
    evals = [(k, v) for k, v in plan.observed.get("evals", []) if math.isfinite(v)
             and (f not in ("nan", "lr_jump", "frozen") or k < plan.onset)]
    if evals:
        best = min(evals, key=lambda e: e[1])
        if evals[-1][1] >= 1.02 * best[1]:
            lab.append({"type": "overfitting", "step": at("end", best[0])})
    if f == "healthy" and len(lab) > 1:
        lab.pop(0)  # the healthy run overfit
    if f not in ("stall", "slowdown") or "time" not in shows:
        out["unscored"].append("throughput_drop")
    for lb in lab:
        lb["confidence"] = "high"
    return out


def _lr_jump_labels(plan: Plan, shows: set[str], lab: list[dict[str, Any]], spans: list[dict[str, Any]],
                    at: Callable[[str, int], int]) -> None:
    s = plan.onset
    if "lr" in shows:
        lab.append({"type": "lr_schedule", "step": at("onset", s)})
    losses = plan.observed.get("losses", [])
    bad = next((k for k, v in losses if k >= s and not math.isfinite(v)), None)
    if diverged(losses, s):
        lab.append({"type": "divergence", "step": at("onset", s)})
    if bad is not None:
        lab.append({"type": "nan", "step": at("end", bad)})
    for t in ("loss_spike", "grad_explosion"):
        spans.append({"type": t, "from": at("onset", s), "to": 10**9})


def diverged(losses: list[tuple[int, float]], onset: int) -> bool:
    """Did the run diverge at `onset` (the LR jump)? `losses`: (step, loss) as logged, in any numbering that
    keeps their order with the onset's. Yes when a loss after the onset is non-finite, or when the losses of
    the last fifth of the run stay (their median) above the level before the onset (the median of the last
    tenth before it) by more than half of the descent the run had made by then (from the median of its
    first tenth): the run lost at least half of what it had learned and did not get it back.

    The rule before compared the tail with the 90th percentile of every loss before the onset, the untrained
    start included: a loss back at 1.27 after a descent from 1.34 to 0.79 (chance is 1.39) was no divergence.
    """
    before = [v for k, v in losses if k < onset and math.isfinite(v)]
    after = [v for k, v in losses if k >= onset]
    if not before or not after:
        return False
    if not all(math.isfinite(v) for v in after):
        return True
    n = max(1, len(losses) // 10)
    start, level = statistics.median(before[:n]), statistics.median(before[-n:])
    tail = statistics.median(after[-max(1, len(losses) // 5):])
    return tail - level > 0.5 * max(start - level, 0.0)
