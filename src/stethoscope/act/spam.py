"""SPAM, the spike-aware Adam with momentum reset (Huang et al., "SPAM: Spike-Aware Adam with Momentum
Reset for Stable LLM Training", ICLR 2025), as an opt-in mitigation of loss spikes:

* spike-aware clipping: a gradient entry whose square exceeds `theta` times Adam's second-moment
  estimate of that entry is scaled back to sign(g) * sqrt(theta * v) before it enters the moments, so
  one bad batch cannot inflate `v` (which would stall the entry for thousands of steps) or throw `m`;
* momentum reset: every `reset_every` steps both moments start again from zero (bias correction too),
  so what a spike left in them is forgotten; the LR then warms up again over `warmup` steps (cosine,
  from `warmup_floor` of it), as the paper does, since fresh moments make the first updates large.

Otherwise it is AdamW (decoupled weight decay). `clipped` counts the entries clipped so far,
`last_clipped` those of the last step.

    from stethoscope.act.spam import SPAM
    opt = SPAM(model.parameters(), lr=3e-4, weight_decay=0.1)          # instead of torch.optim.AdamW
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any


def __getattr__(name: str) -> Any:
    """`SPAM` is built on first use: importing this module imports no torch (the class needs it)."""
    if name != "SPAM":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    cls = globals()["SPAM"] = _build()
    return cls


def _build() -> type:
    try:
        import torch
    except ImportError:
        raise ImportError("stethoscope.act.spam needs torch: pip install 'stethoscope[torch]'") from None

    class _SPAM(torch.optim.Optimizer):
        """`SPAM(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, theta=5000.0, reset_every=500,
        warmup=150, warmup_floor=0.0)`: AdamW with spike-aware clipping and momentum reset (module docstring).
        `reset_every=None` never resets the moments; `theta=None` never clips."""

        def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                     eps: float = 1e-8, weight_decay: float = 0.0, theta: float | None = 5000.0,
                     reset_every: int | None = 500, warmup: int = 150, warmup_floor: float = 0.0) -> None:
            if lr < 0 or eps < 0 or weight_decay < 0:
                raise ValueError(f"SPAM: lr, eps and weight_decay must be >= 0 (got {lr}, {eps}, {weight_decay})")
            if not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
                raise ValueError(f"SPAM: betas must be in [0, 1), got {betas}")
            if theta is not None and theta <= 0:
                raise ValueError(f"SPAM: theta must be > 0 or None, got {theta}")
            if reset_every is not None and reset_every < 1:
                raise ValueError(f"SPAM: reset_every must be >= 1 or None, got {reset_every}")
            if warmup < 0 or not 0 <= warmup_floor <= 1:
                raise ValueError(f"SPAM: warmup must be >= 0 and warmup_floor in [0, 1] (got {warmup}, {warmup_floor})")
            super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})
            self.theta, self.reset_every, self.warmup, self.warmup_floor = theta, reset_every, warmup, warmup_floor
            self.clipped = 0
            self.last_clipped = 0
            self.resets = 0
            self.steps = 0

        def _lr_factor(self) -> float:
            """The cosine warm-up after a moment reset (1.0 before the first reset and after the warm-up)."""
            if self.reset_every is None or self.warmup == 0 or self.steps < self.reset_every:
                return 1.0
            since = self.steps % self.reset_every
            if since >= self.warmup:
                return 1.0
            return self.warmup_floor + (1 - self.warmup_floor) * 0.5 * (1 - math.cos(math.pi * (since + 1) / self.warmup))

        @torch.no_grad()
        def step(self, closure: Callable[[], Any] | None = None) -> Any:
            loss = None
            if closure is not None:
                with torch.enable_grad():
                    loss = closure()
            reset = self.reset_every is not None and self.steps > 0 and self.steps % self.reset_every == 0
            if reset:
                self.resets += 1
            factor = self._lr_factor()
            clipped = 0
            for group in self.param_groups:
                beta1, beta2 = group["betas"]
                lr = group["lr"] * factor
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    if p.grad.is_sparse:
                        raise RuntimeError("SPAM does not support sparse gradients")
                    g = p.grad
                    state = self.state[p]
                    if not state or reset:
                        state["step"] = 0
                        state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                        state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    m, v = state["exp_avg"], state["exp_avg_sq"]
                    if self.theta is not None and state["step"] > 0:
                        limit = (v * self.theta).sqrt_()
                        spikes = g.abs() > limit  # g^2 > theta * v
                        n = int(spikes.sum())  # host sync: once per parameter per step
                        if n:
                            g = torch.where(spikes, g.sign() * limit, g)
                            clipped += n
                    state["step"] += 1
                    t = state["step"]
                    if group["weight_decay"]:
                        p.mul_(1 - lr * group["weight_decay"])
                    m.mul_(beta1).add_(g, alpha=1 - beta1)
                    v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
                    denom = (v / (1 - beta2 ** t)).sqrt_().add_(group["eps"])
                    p.addcdiv_(m, denom, value=-lr / (1 - beta1 ** t))
            self.steps += 1
            self.last_clipped = clipped
            self.clipped += clipped
            return loss

        def state_dict(self) -> dict[str, Any]:
            out = super().state_dict()
            out["spam"] = {"clipped": self.clipped, "resets": self.resets, "steps": self.steps}
            return out

        def load_state_dict(self, state_dict: dict[str, Any]) -> None:
            state_dict = dict(state_dict)
            extra = state_dict.pop("spam", None) or {}
            super().load_state_dict(state_dict)
            self.clipped, self.resets, self.steps = (int(extra.get(k, 0)) for k in ("clipped", "resets", "steps"))

    _SPAM.__name__ = _SPAM.__qualname__ = "SPAM"
    _SPAM.__module__ = __name__
    return _SPAM
