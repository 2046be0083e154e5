"""`stethoscope demo`: a tiny char-level GPT trained on CPU with the Monitor on.

Faults can be injected to see what stethoscope says about them (`--inject nan@300`, `spike@300`,
`lr@300`, `diverge@300`); with `recover=True` (`--recover`) the run checkpoints itself and automatic
recovery rolls it back past the fault (the loop is the one docs/checkpoints.md shows for `Recovery`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stethoscope.errors import UsageError

INJECTIONS = ("nan", "spike", "lr", "diverge")
_INJECT_RE = re.compile(r"^(nan|spike|lr|diverge)@(\d+)$")
DIVERGE_STEPS = 10  # diverge@N: the LR x100 for this many steps
SPIKE_BURST = 20  # spike@N with recovery: this many garbage batches (a bad data shard), not one
SKIP_BATCHES = 30  # what recovery skips after a rollback (PaLM skipped 200-500 batches of a far longer run)
MAX_STEPS = 1_000_000  # the tiny model trains ~1,000 steps a minute on CPU: this is ~17 hours


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
    recover: bool = False
    """Checkpoint every `checkpoint_every` steps and turn automatic recovery on."""
    patience: int = 20
    checkpoint_every: int = 10

    def __post_init__(self) -> None:
        if not 1 <= self.steps <= MAX_STEPS:
            raise UsageError(f"--steps must be between 1 and {MAX_STEPS:,} (the demo trains about 1,000 steps a "
                             f"minute on CPU: {MAX_STEPS:,} take ~17 hours), got {self.steps}")
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
    run(out, cfg, progress, alerts)
    return out


def run(out: Path, cfg: DemoConfig, progress: Any = None, alerts: Any = None, detect: bool = True) -> dict[str, Any]:
    """Train into `out`: {"final_loss": held-out loss at the end, "rollbacks": [...], "gave_up": why or None,
    "stopped": the step recovery stopped at or None}."""
    import shutil

    import torch

    from stethoscope.act.recovery import Recovery
    from stethoscope.capture.monitor import Monitor
    from stethoscope.checkpoint import Checkpoints
    from stethoscope.demo.data import CharData, stdlib_text
    from stethoscope.demo.gpt import GPTConfig, TinyGPT

    torch.set_num_threads(1)  # two threads on a shared 2-core machine make steps 10x slower
    torch.manual_seed(cfg.seed)
    data = CharData(stdlib_text(), cfg.block_size, seed=cfg.seed)
    model = TinyGPT(GPTConfig(block_size=cfg.block_size, n_layer=cfg.n_layer, n_embd=cfg.n_embd))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.1)
    injection = cfg.injection()
    ck = recovery = None
    if cfg.recover:
        shutil.rmtree(Path(out) / "checkpoints", ignore_errors=True)  # the demo's own: never an older run's
        ck = Checkpoints(Path(out) / "checkpoints", every=cfg.checkpoint_every, keep_last=3, on_signal=None)
        recovery = Recovery(patience=cfg.patience, lr_factor=0.5, skip_batches=SKIP_BATCHES, max_rollbacks=3)
    stopped = None
    with Monitor(out, model=model, optimizer=opt, tokens_per_step=cfg.batch_size * cfg.block_size,
                 config={"demo": vars(cfg), "model": vars(model.config)}, max_grad_norm=1.0, alerts=alerts,
                 checkpoints=ck, recovery=recovery, detect=detect) as mon:
        step = 0
        while step < cfg.steps:
            x, y, ids = data.batch(cfg.batch_size)
            if mon.should_skip(step):  # recovery skips the batches of an incident it rolled back from
                step += 1
                continue
            first_pass = mon.recovery is None or not mon.recovery.rollbacks  # diverge and nan strike once
            scale = mon.recovery.lr_scale if mon.recovery is not None else 1.0
            for group in opt.param_groups:
                group["lr"] = lr_at(step, cfg) * scale * _lr_fault(injection, step, first_pass)
            x, y = _inject_batch(injection, step, x, y, SPIKE_BURST if cfg.recover else 1)
            if injection == ("nan", step) and first_pass:
                _poison(model)
            _, loss = model(x, y)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            ctl = mon.step(step, loss=loss, grad_norm=norm, batch_ids=ids)
            if (step + 1) % cfg.eval_every == 0 or step == cfg.steps - 1:
                mon.eval(step, eval_loss=evaluate(model, data, cfg))
            if progress is not None:
                progress(step, loss)
            if ctl.stop:
                stopped = step
                break
            step = ctl.resume_step if ctl.rollback else step + 1
        final = final_loss(model, data, cfg)
        mon.log({"demo/final_loss": final})
    policy = mon.recovery
    return {"final_loss": final, "rollbacks": policy.rollbacks if policy else [], "stopped": stopped,
            "gave_up": policy.gave_up if policy else None}


def _lr_fault(injection: tuple[str, int] | None, step: int, first_pass: bool) -> float:
    if _after(injection, "lr", step):
        return 50.0
    if first_pass and _after(injection, "diverge", step) and step < injection[1] + DIVERGE_STEPS:  # type: ignore[index]
        return 100.0
    return 1.0


def final_loss(model: Any, data: Any, cfg: DemoConfig, batches: int = 8) -> float:
    """The loss on fixed held-out windows (the same for every run of a seed): the number runs compare on."""
    import torch

    g = torch.Generator().manual_seed(1234)
    starts = torch.randint(len(data.val) - cfg.block_size - 1, (batches * cfg.batch_size,), generator=g).tolist()
    x = torch.stack([data.val[s:s + cfg.block_size] for s in starts])
    y = torch.stack([data.val[s + 1:s + 1 + cfg.block_size] for s in starts])
    model.eval()
    with torch.no_grad():
        loss = sum(model(x[i:i + cfg.batch_size], y[i:i + cfg.batch_size])[1].item()  # host sync: once, at the end
                   for i in range(0, len(x), cfg.batch_size)) / batches
    model.train()
    return loss


def _after(injection: tuple[str, int] | None, kind: str, step: int) -> bool:
    return injection is not None and injection[0] == kind and step >= injection[1]


def _inject_batch(injection: tuple[str, int] | None, step: int, x: Any, y: Any, burst: int = 1) -> tuple[Any, Any]:
    if injection is None or not injection[1] <= step < injection[1] + burst:
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
