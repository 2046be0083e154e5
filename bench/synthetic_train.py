"""Tiny REAL training runs for the synthetic benchmark, with one fault injected, cached on disk.

A character-level MLP language model (8 characters of context) trains on Python's own standard
library source, on the CPU with one thread (`torch.set_num_threads(1)`). A `RunSpec` says what varies
(model width, seed, batch, optimizer, LR schedule, fp16 loss scaling) and which fault is injected
where, how strongly. Every iteration is recorded in a `Trace`; step times are real wall-clock times
(throughput faults are injected sleeps). Traces are cached as JSON under `bench/.cache/`, keyed on
`GENERATOR_VERSION` and the spec, so re-scoring never retrains: bump the version when `train` changes.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

GENERATOR_VERSION = "2"
CACHE = Path(__file__).resolve().parent / ".cache"
CONTEXT = 8
SCALE_START = 2.0 ** 16  # fp16 dynamic loss scale: the usual initial value, floor 1
SCALE_GROWTH_EVERY = 200  # clean steps before the scale doubles (PyTorch's GradScaler default is 2000)


@dataclass(frozen=True)
class RunSpec:
    """One run: the model, the optimisation and the fault (`scenario`, at iteration `fault_at`)."""

    scenario: str
    seed: int
    hidden: int = 512
    batch: int = 128
    optimizer: str = "adam"  # adam | adamw | sgd (momentum 0.9)
    lr: float = 3e-3
    schedule: str = "constant"  # constant | cosine (linear warm-up, cosine to 10% of the peak)
    warmup: int = 0
    steps: int = 1200
    fault_at: int = 600
    strength: float = 1.0  # LR factor, garbage fraction, stall period, slowdown factor, ... per scenario
    train_chars: int | None = None
    eval_every: int = 100
    fp16: bool = False

    @property
    def name(self) -> str:
        return f"{self.scenario}-s{self.seed}"

    def key(self) -> str:
        blob = json.dumps([GENERATOR_VERSION, asdict(self)], sort_keys=True)
        return f"{self.name}-{hashlib.sha1(blob.encode()).hexdigest()[:10]}"


@dataclass
class Trace:
    """What one run produced, per iteration (0-based); `loss_scale` is empty for fp32 runs."""

    loss: list[float] = field(default_factory=list)
    grad_norm: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    step_time: list[float] = field(default_factory=list)  # seconds
    loss_scale: list[float] = field(default_factory=list)
    skipped: list[bool] = field(default_factory=list)  # fp16 overflow: the optimizer step was skipped
    evals: list[tuple[int, float]] = field(default_factory=list)  # (iteration, eval loss)
    seconds: float = 0.0


def corpus() -> str:
    """~1 MB of Python source from the standard library: enough text that 1200 steps do not overfit."""
    import importlib
    import inspect

    names = ("collections", "dataclasses", "textwrap", "json.decoder", "json.encoder", "argparse", "inspect",
             "typing", "pathlib", "logging", "subprocess", "threading", "tarfile", "zipfile", "email.message",
             "http.client", "urllib.request", "pydoc", "difflib", "decimal", "fractions", "statistics", "calendar",
             "configparser", "shutil", "tempfile", "ast", "dis", "pickle", "functools", "enum", "unittest.case")
    out = []
    for name in names:
        try:
            out.append(inspect.getsource(importlib.import_module(name)))
        except (ImportError, OSError, TypeError):
            continue
    return "".join(out)


def scheduled_lr(spec: RunSpec, it: int) -> float:
    """The LR the run's schedule gives at iteration `it`, with the scenario's LR fault applied."""
    if spec.scenario == "schedule_reset" and it >= spec.fault_at:
        it -= spec.fault_at  # a resume that rebuilt the scheduler: warm-up starts again
    lr = spec.lr
    if spec.schedule == "cosine":
        if it < spec.warmup:
            lr *= (it + 1) / spec.warmup
        else:
            frac = (it - spec.warmup) / max(1, spec.steps - spec.warmup)
            lr *= 0.1 + 0.45 * (1 + math.cos(math.pi * min(1.0, frac)))
    if spec.scenario == "lr_too_high" and it >= spec.fault_at:
        lr *= spec.strength
    if spec.scenario == "lr_zero" and it >= spec.fault_at:
        lr = 0.0  # a scheduler bug: the LR drops to 0 and stays there
    return lr


class _Scaler:
    """fp16 dynamic loss scaling, simulated: random overflows halve the scale and skip the step; a
    `loss_scale_collapse` run overflows every `strength` iterations from `fault_at` and at the floor
    on every step (DeepSpeed's "loss scale already at minimum"), so the model stops learning."""

    def __init__(self, spec: RunSpec, rng: random.Random) -> None:
        self.spec, self.rng, self.scale, self.clean = spec, rng, SCALE_START, 0

    def overflow(self, it: int) -> bool:
        s = self.spec
        if s.scenario == "loss_scale_collapse" and it >= s.fault_at:
            hit = self.scale <= 1.0 or (it - s.fault_at) % int(s.strength) == 0
        else:
            hit = self.rng.random() < 0.004
        if hit:
            self.scale, self.clean = max(1.0, self.scale / 2), 0
        else:
            self.clean += 1
            if self.clean % SCALE_GROWTH_EVERY == 0:
                self.scale = min(SCALE_START * 4, self.scale * 2)
        return hit


def train(spec: RunSpec, text: str) -> Trace:
    """Train the tiny model as `spec` says and record every iteration."""
    import torch

    torch.set_num_threads(1)
    t_start = time.perf_counter()
    g = torch.Generator().manual_seed(spec.seed)
    chars = sorted(set(text))
    idx = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([idx[c] for c in text], dtype=torch.long)
    chunks = data[: len(data) // 1000 * 1000].view(-1, 1000)  # every 10th chunk of 1000 characters is held out
    train_data = chunks[torch.arange(len(chunks)) % 10 != 0].reshape(-1)
    eval_data = chunks[::10].reshape(-1)
    if spec.train_chars is not None:
        train_data = train_data[: spec.train_chars]
    vocab = len(chars)
    torch.manual_seed(spec.seed)
    model = torch.nn.Sequential(
        torch.nn.Embedding(vocab, 16), torch.nn.Flatten(), torch.nn.Linear(16 * CONTEXT, spec.hidden),
        torch.nn.GELU(), torch.nn.Linear(spec.hidden, vocab),
    )
    opt = _optimizer(spec, model.parameters())
    windows = {"train": train_data.unfold(0, CONTEXT + 1, 1), "eval": eval_data.unfold(0, CONTEXT + 1, 1)}
    if spec.scenario == "data_repeat":  # from fault_at, a few samples cycled (a data loader stuck on one shard)
        start = int(torch.randint(0, len(windows["train"]) - int(spec.strength), (1,), generator=g))
        windows["repeat"] = windows["train"][start: start + int(spec.strength)]

    def batch(source: str) -> tuple[Any, Any]:
        w = windows[source]
        rows = w[torch.randint(0, len(w), (spec.batch,), generator=g)]
        return rows[:, :-1], rows[:, -1]

    eval_set = [batch("eval") for _ in range(16)]  # a fixed held-out set, as real evals use
    scaler = _Scaler(spec, random.Random(spec.seed)) if spec.fp16 else None
    trace = Trace()
    for it in range(spec.steps):
        t0 = time.perf_counter()
        lr = scheduled_lr(spec, it)
        for group in opt.param_groups:
            group["lr"] = lr
        x, y = batch("repeat" if spec.scenario == "data_repeat" and it >= spec.fault_at else "train")
        if spec.scenario == "garbage_batch" and it == spec.fault_at:
            n = max(1, int(spec.batch * spec.strength))  # a corrupted shard: part of the batch is noise
            x[:n] = torch.randint(0, vocab, x[:n].shape, generator=g)
            y[:n] = torch.randint(0, vocab, y[:n].shape, generator=g)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        if spec.scenario == "nan_batch" and it == spec.fault_at:
            loss = loss * float("nan")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
        skipped = scaler.overflow(it) if scaler else False
        if not skipped:
            opt.step()
        _inject_stall(spec, it, trace.step_time)
        trace.loss.append(loss.item())  # host sync: a benchmark, not a training loop
        trace.grad_norm.append(gn.item())
        trace.lr.append(lr)
        trace.skipped.append(skipped)
        if scaler:
            trace.loss_scale.append(scaler.scale)
        trace.step_time.append(time.perf_counter() - t0)
        if (it + 1) % spec.eval_every == 0:
            with torch.no_grad():
                losses = [torch.nn.functional.cross_entropy(model(bx), by).item() for bx, by in eval_set]
            trace.evals.append((it, sum(losses) / len(losses)))
    trace.seconds = time.perf_counter() - t_start
    return trace


def _optimizer(spec: RunSpec, params: Any) -> Any:
    import torch

    if spec.optimizer == "sgd":
        return torch.optim.SGD(params, lr=spec.lr, momentum=0.9)
    if spec.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=spec.lr, weight_decay=0.1)
    return torch.optim.Adam(params, lr=spec.lr)


def _inject_stall(spec: RunSpec, it: int, times: list[float]) -> None:
    """Throughput faults are real sleeps inside the step: a stop-the-world pause (GC, a synchronous
    save) every `strength` iterations, or slow storage making every step `strength` times slower."""
    if it < spec.fault_at:
        return
    if spec.scenario == "gc_stalls" and (it - spec.fault_at) % int(spec.strength) == 0:
        time.sleep(0.04)
    elif spec.scenario == "slow_storage":
        base = statistics.median(times[spec.fault_at - 50: spec.fault_at])
        time.sleep((spec.strength - 1) * base)


def cached_trace(spec: RunSpec, text: str | None = None) -> tuple[Trace, bool]:
    """The run's trace from the cache, training it (and caching it) when absent; True when trained."""
    path = CACHE / f"synthetic-v{GENERATOR_VERSION}" / f"{spec.key()}.json"
    if path.exists():
        d = json.loads(path.read_text())
        d["evals"] = [tuple(e) for e in d["evals"]]
        return Trace(**d), False
    trace = train(spec, text if text is not None else corpus())
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(trace)))  # bare NaN/Infinity: Python's json reads them back
    tmp.replace(path)
    return trace, True
