"""`stethoscope demo`: a tiny char-level GPT trained on CPU with the Monitor on.

Faults can be injected to see what stethoscope says about them (`--inject nan@300`, `spike@300`,
`lr@300`); later capabilities (detection, rollback, report, dashboard) hang off the same loop.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stethoscope.errors import UsageError

INJECTIONS = ("nan", "spike", "lr")
_INJECT_RE = re.compile(r"^(nan|spike|lr)@(\d+)$")


@dataclass
class DemoConfig:
    steps: int = 1000
    batch_size: int = 16
    block_size: int = 64
    n_layer: int = 2
    n_embd: int = 128
    lr: float = 3e-3
    warmup: int = 50
    eval_every: int = 100
    eval_batches: int = 4
    seed: int = 0
    inject: str | None = None

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise UsageError(f"--steps must be at least 1, got {self.steps}")
        if self.inject is not None and not _INJECT_RE.match(self.inject):
            raise UsageError(f"--inject {self.inject!r}: expected KIND@STEP with KIND one of {', '.join(INJECTIONS)}")
        at = self.injection()
        if at is not None and at[1] >= self.steps:
            raise UsageError(f"--inject {self.inject}: step {at[1]} is outside the run (steps 0-{self.steps - 1}); "
                             f"inject before step {self.steps} or raise --steps")

    def injection(self) -> tuple[str, int] | None:
        if self.inject is None:
            return None
        kind, step = _INJECT_RE.match(self.inject).groups()
        return kind, int(step)


def lr_at(step: int, cfg: DemoConfig) -> float:
    """Linear warm-up then cosine decay to 10%."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def train(out: Path, cfg: DemoConfig, progress: Any = None, alerts: Any = None) -> Path:
    """Train the demo model into the run directory `out`; returns it. `alerts`: the Monitor's `alerts=`."""
    import torch

    from stethoscope.capture.monitor import Monitor
    from stethoscope.demo.data import CharData, stdlib_text
    from stethoscope.demo.gpt import GPTConfig, TinyGPT

    torch.set_num_threads(1)  # two threads on a shared 2-core machine make steps 10x slower
    torch.manual_seed(cfg.seed)
    data = CharData(stdlib_text(), cfg.block_size, seed=cfg.seed)
    model = TinyGPT(GPTConfig(block_size=cfg.block_size, n_layer=cfg.n_layer, n_embd=cfg.n_embd))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.1)
    injection = cfg.injection()
    with Monitor(out, model=model, optimizer=opt, tokens_per_step=cfg.batch_size * cfg.block_size,
                 config={"demo": vars(cfg), "model": vars(model.config)}, max_grad_norm=1.0, alerts=alerts) as mon:
        for step in range(cfg.steps):
            for group in opt.param_groups:
                group["lr"] = lr_at(step, cfg) * (50.0 if _after(injection, "lr", step) else 1.0)
            x, y, ids = data.batch(cfg.batch_size)
            x, y = _inject_batch(injection, step, x, y)
            if injection == ("nan", step):
                _poison(model)
            _, loss = model(x, y)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            mon.step(step, loss=loss, grad_norm=norm, batch_ids=ids)
            if (step + 1) % cfg.eval_every == 0 or step == cfg.steps - 1:
                mon.eval(step, eval_loss=evaluate(model, data, cfg))
            if progress is not None:
                progress(step, loss)
    return out


def _after(injection: tuple[str, int] | None, kind: str, step: int) -> bool:
    return injection is not None and injection[0] == kind and step >= injection[1]


def _inject_batch(injection: tuple[str, int] | None, step: int, x: Any, y: Any) -> tuple[Any, Any]:
    if injection is None or injection[1] != step:
        return x, y
    import torch

    kind = injection[0]
    if kind == "spike":  # a garbage batch: uniformly random tokens the model cannot predict
        g = torch.Generator().manual_seed(step)
        return torch.randint(0, 128, x.shape, generator=g), torch.randint(0, 128, y.shape, generator=g)
    return x, y


def _poison(model: Any) -> None:
    """One weight turns NaN, as an unguarded fp16 overflow leaves it: the loss and the gradients are NaN
    from this step on and the fault stays (the optimizer spreads it), as in a run nobody watches."""
    import torch

    with torch.no_grad():
        model.head.weight[0, 0] = float("nan")


def evaluate(model: Any, data: Any, cfg: DemoConfig) -> float:
    import torch

    model.eval()
    with torch.no_grad():
        losses = [model(*data.batch(cfg.batch_size, "val")[:2])[1].item()  # host sync: eval only
                  for _ in range(cfg.eval_batches)]
    model.train()
    return sum(losses) / len(losses)


def default_out(root: str = "runs") -> Path:
    """runs/demo, or the first of runs/demo-2, runs/demo-3, … that holds no run yet."""
    from stethoscope.store.db import holds_run

    base = Path(root) / "demo"
    n = 1
    while holds_run(base if n == 1 else base.with_name(f"demo-{n}")):
        n += 1
    return base if n == 1 else base.with_name(f"demo-{n}")
