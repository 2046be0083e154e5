"""A tiny decoder-only GPT trained on the CPU, with one fault injected through the loop as a user meets it.

The model is nanoGPT's shape in miniature (token + position embeddings, pre-LayerNorm blocks of causal
self-attention and a GELU MLP, a tied LM head), character level, trained with AdamW, linear warm-up
then cosine decay, gradient clipping at 1.0, and a periodic evaluation on a fixed held-back split.
The corpus is Python's own standard-library source, read from this interpreter's installation:
nothing is downloaded. Everything but the fault is drawn from the seed (width, depth, context, batch,
peak LR, run length, where the fault lands: 35-65% of the run).

Faults (`FAULTS`), injected at iteration `onset`:
* `nan`: one weight set to NaN (or, for odd seeds, a layer scaled by 1e38: an fp16-like overflow).
* `lr_jump`: the LR set to 50-100 times the schedule's LR at the onset, and held there (set by hand).
* `lr_spike`: the LR multiplied by 20-32 for 2-4 iterations, then back to the schedule.
* `frozen`: every param group's LR set to 0 from the onset while the loggers still show the schedule's
  LR (a buggy callback overriding the optimizer): the weights stop moving, silently.
* `stall`: a data-loader stall, a sleep of 0.1-0.2 s in the batch fetch every 5-8 iterations.
* `slowdown`: each iteration k after the onset sleeps k x 0.2-0.4 ms in the batch fetch.
* `overfit`: the train split is a few KiB of text (no onset): validation loss turns up.
* `healthy`: nothing.
"""

from __future__ import annotations

import math
import random
import sysconfig
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812

FAULTS = ("healthy", "nan", "lr_jump", "lr_spike", "frozen", "stall", "slowdown", "overfit")
VOCAB = [chr(c) for c in range(32, 127)] + ["\n", "\t"]
CORPUS_FILES = ("argparse.py", "collections/__init__.py", "dataclasses.py", "email/message.py", "inspect.py",
                "json/decoder.py", "logging/__init__.py", "pathlib.py", "shutil.py", "subprocess.py",
                "tarfile.py", "textwrap.py", "typing.py", "unittest/case.py", "zipfile.py")
VAL_FILES = ("difflib.py", "heapq.py", "fractions.py")


@dataclass
class Spec:
    fault: str
    seed: int
    n_layer: int = 2
    n_embd: int = 64
    n_head: int = 4
    block: int = 64
    batch: int = 16
    lr: float = 1e-3
    iters: int = 320
    warmup: int = 30
    eval_interval: int = 40
    eval_iters: int = 6
    onset: int | None = None
    strength: float = 1.0  # LR factor, sleep seconds, or ms per step, by fault
    every: int = 0  # stall period / spike length
    variant: str = ""

    @property
    def name(self) -> str:
        return f"{self.fault}-s{self.seed}"


def spec(fault: str, seed: int) -> Spec:
    """The run of one fault and seed: everything that is not the fault is drawn from the seed."""
    r = random.Random(f"gpt/{seed}")  # the same model and schedule for every fault of one seed
    s = Spec(fault, seed, n_layer=r.choice((2, 3)), n_embd=r.choice((48, 64)), block=r.choice((48, 64)),
             batch=r.choice((8, 12, 16)), lr=r.choice((2e-3, 3e-3, 4e-3)), iters=r.choice((360, 420, 480)))
    f = random.Random(f"gpt/{fault}/{seed}")
    if fault not in ("healthy", "overfit"):
        s.onset = int(s.iters * (0.35 + 0.3 * f.random()))
    if fault == "nan":
        s.variant = "overflow" if seed % 2 else "weight"
    elif fault == "lr_jump":
        s.strength = f.uniform(50, 100)
    elif fault == "lr_spike":
        s.strength, s.every = f.uniform(20, 32), f.randint(2, 4)
    elif fault == "stall":
        s.strength, s.every = f.uniform(0.1, 0.2), f.randint(5, 8)
    elif fault == "slowdown":
        s.strength = f.uniform(0.2e-3, 0.4e-3)
    return s


# -- data ------------------------------------------------------------------------------------------
def _text(names: tuple[str, ...]) -> str:
    root = Path(sysconfig.get_paths()["stdlib"])
    return "".join((root / n).read_text(encoding="utf-8", errors="replace") for n in names)


def encode(text: str) -> torch.Tensor:
    index = {c: i for i, c in enumerate(VOCAB)}
    return torch.tensor([index.get(c, 0) for c in text], dtype=torch.long)


def corpus(spec: Spec) -> tuple[torch.Tensor, torch.Tensor]:
    train, val = encode(_text(CORPUS_FILES)), encode(_text(VAL_FILES))
    if spec.fault == "overfit":  # a few KiB of text: the model learns it by heart
        start = random.Random(f"gpt/overfit/{spec.seed}").randrange(0, len(train) - 8192)
        train = train[start:start + random.Random(spec.seed).choice((1024, 1536, 2048))]
    return train, val


# -- model -----------------------------------------------------------------------------------------
class Block(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.attn(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, s: Spec) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(len(VOCAB), s.n_embd), nn.Embedding(s.block, s.n_embd)
        self.blocks = nn.ModuleList(Block(s.n_embd, s.n_head) for _ in range(s.n_layer))
        self.ln_f = nn.LayerNorm(s.n_embd)
        self.head = nn.Linear(s.n_embd, len(VOCAB), bias=False)
        self.head.weight = self.tok.weight  # tied, as in GPT-2
        for m in self.modules():  # GPT-2's initialisation
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters()) - model.pos.weight.numel()


# -- the loop --------------------------------------------------------------------------------------
class Logger(Protocol):
    def start(self, s: Spec, info: dict[str, Any]) -> None: ...
    def step(self, it: int, loss: float, lr: float, grad_norm: float, dt: float) -> None: ...
    def eval(self, it: int, train_loss: float, val_loss: float, seconds: float) -> None: ...
    def close(self, info: dict[str, Any]) -> None: ...


@dataclass
class Trace:
    """What happened, per iteration: the truth the labels are computed from."""
    losses: list[float] = field(default_factory=list)
    lr_shown: list[float] = field(default_factory=list)
    lr_used: list[float] = field(default_factory=list)
    dts: list[float] = field(default_factory=list)
    evals: list[tuple[int, float, float]] = field(default_factory=list)  # (iteration before which, train, val)


def schedule(s: Spec, it: int) -> float:
    if it < s.warmup:
        return s.lr * (it + 1) / s.warmup
    ratio = (it - s.warmup) / max(1, s.iters - s.warmup)
    return s.lr * 0.1 + 0.5 * (1 + math.cos(math.pi * min(1.0, ratio))) * (s.lr - s.lr * 0.1)


def _lr_used(s: Spec, it: int, lr: float) -> float:
    if s.onset is None or it < s.onset:
        return lr
    if s.fault == "lr_jump":  # set by hand and held: the schedule no longer applies
        return schedule(s, s.onset) * s.strength
    if s.fault == "lr_spike" and it < s.onset + s.every:
        return lr * s.strength
    if s.fault == "frozen":
        return 0.0
    return lr


def _delay(s: Spec, it: int) -> None:
    """The batch fetch's extra wait: the stall and slowdown faults live in the data loader."""
    if s.onset is None or it < s.onset:
        return
    k = it - s.onset
    if s.fault == "stall" and k % s.every == 0:
        time.sleep(s.strength)
    elif s.fault == "slowdown":
        time.sleep(s.strength * k)


def _inject_nan(s: Spec, model: GPT) -> None:
    with torch.no_grad():
        if s.variant == "weight":
            model.ln_f.weight[0] = float("nan")
        else:  # an overflow: one layer's weights past what fp16 (or even fp32) activations hold
            model.blocks[-1].mlp[0].weight.mul_(1e38)


def train(s: Spec, loggers: list[Logger]) -> Trace:
    torch.manual_seed(s.seed)
    train_data, val_data = corpus(s)
    model = GPT(s)
    opt = torch.optim.AdamW(model.parameters(), lr=s.lr, betas=(0.9, 0.95), weight_decay=0.1)
    gen = torch.Generator().manual_seed(s.seed)
    eval_gen = torch.Generator().manual_seed(99)
    evalsets = {k: [_batch(d, s, eval_gen) for _ in range(s.eval_iters)] for k, d in (("train", train_data),
                                                                                      ("val", val_data))}
    trace = Trace()
    info = {"params": n_params(model), "train_chars": len(train_data), "val_chars": len(val_data)}
    for lg in loggers:
        lg.start(s, info)
    t_start = time.time()
    t0 = time.time()
    for it in range(s.iters + 1):
        lr = schedule(s, it)
        used = _lr_used(s, it, lr)
        for g in opt.param_groups:
            g["lr"] = used
        if it % s.eval_interval == 0:
            _evaluate(model, evalsets, it, trace, loggers)
        if s.onset == it and s.fault == "nan":
            _inject_nan(s, model)
        _delay(s, it)
        x, y = _batch(train_data, s, gen)
        loss = model(x, y)
        loss.backward()
        gn = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))  # host sync: the logged norm
        opt.step()
        opt.zero_grad(set_to_none=True)
        lossf = loss.item()  # host sync: every iteration is logged
        t1 = time.time()
        dt, t0 = t1 - t0, t1
        trace.losses.append(lossf)
        shown = lr if s.fault == "frozen" else used  # the frozen fault's callback hides behind the schedule
        trace.lr_shown.append(shown)
        trace.lr_used.append(used)
        trace.dts.append(dt)
        for lg in loggers:
            lg.step(it, lossf, shown, gn, dt)
    info["runtime"] = time.time() - t_start
    info["mean_loss"] = sum(x for x in trace.losses if math.isfinite(x)) / max(1, len(trace.losses))
    for lg in loggers:
        lg.close(info)
    return trace


def _batch(data: torch.Tensor, s: Spec, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    ix = torch.randint(len(data) - s.block - 1, (s.batch,), generator=gen)
    x = torch.stack([data[i:i + s.block] for i in ix.tolist()])
    y = torch.stack([data[i + 1:i + 1 + s.block] for i in ix.tolist()])
    return x, y


@torch.no_grad()
def _evaluate(model: GPT, evalsets: dict[str, list], it: int, trace: Trace, loggers: list[Logger]) -> None:
    t = time.time()
    model.eval()
    out = {k: sum(model(x, y).item() for x, y in batches) / len(batches)  # host sync: once per eval
           for k, batches in evalsets.items()}
    model.train()
    trace.evals.append((it, out["train"], out["val"]))
    for lg in loggers:
        lg.eval(it, out["train"], out["val"], time.time() - t)
