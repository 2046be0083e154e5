"""The gradients a backward left on the model, layer by layer: norms, zero/vanishing/exploding layers,
non-finite ones and dead output units of Linear/Conv layers.

One fused norm per device and dtype (`torch._foreach_norm`) and one host transfer for everything; a
"layer" is a module that owns parameters directly. A dead unit is an output row of a Linear/Conv
weight whose gradient is exactly zero on this batch (the unit's output never got a gradient: a ReLU
that is off for every example, a masked head).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from stethoscope.debug.forward import norms, to_host
from stethoscope.records import json_safe


@dataclass
class GradientConfig:
    """Thresholds of `gradients()`."""

    vanishing_norm: float = 1e-8
    """A layer whose gradient norm is below this (and not exactly 0) is vanishing."""
    vanishing_ratio: float = 1e-5
    """… or below this fraction of the median layer's norm (with at least `min_layers` layers)."""
    exploding_norm: float = 1e4
    """A layer whose gradient norm is above this is exploding."""
    exploding_ratio: float = 1e3
    """… or above this multiple of the median layer's norm (with at least `min_layers` layers)."""
    min_layers: int = 3
    """Layers needed before the median-relative thresholds apply."""
    dead_frac: float = 0.1
    """A Linear/Conv layer is flagged when at least this fraction of its output units are dead."""

    def __post_init__(self) -> None:
        for name in ("vanishing_norm", "vanishing_ratio", "exploding_norm", "exploding_ratio"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if not 0 < self.dead_frac <= 1:
            raise ValueError(f"dead_frac must be in (0, 1], got {self.dead_frac}")
        if self.min_layers < 1:
            raise ValueError(f"min_layers must be >= 1, got {self.min_layers}")


@dataclass
class LayerGrad:
    """One layer's gradient: its norm (over all its parameters) and what is wrong with it."""

    name: str
    type: str
    norm: float
    params: list[str]
    flags: list[str] = field(default_factory=list)
    """Any of: nonfinite, zero, vanishing, exploding, dead_units."""
    units: int = 0
    dead_units: list[int] = field(default_factory=list)
    """Indices of the dead output units (Linear/Conv layers only)."""


@dataclass
class GradientReport:
    """Per-layer gradient norms and the layers flagged; `str()` reads it out."""

    layers: list[LayerGrad]
    total_norm: float
    median_norm: float | None
    no_grad: list[str]
    """Parameters that require a gradient but have none (unused in the forward, or no backward yet)."""

    def flagged(self, flag: str | None = None) -> list[LayerGrad]:
        """The layers with any flag, or with `flag`."""
        return [ly for ly in self.layers if (flag in ly.flags if flag else ly.flags)]

    def layer(self, name: str) -> LayerGrad:
        return next(ly for ly in self.layers if ly.name == name)

    def to_dict(self) -> dict[str, Any]:
        return json_safe(asdict(self))

    def __str__(self) -> str:
        med = f"{self.median_norm:.3g}" if self.median_norm is not None else "-"
        lines = [f"gradients: {len(self.layers)} layers, total norm {self.total_norm:.4g}, median layer {med}; "
                 f"{len(self.flagged())} flagged"]
        for ly in self.flagged():
            dead = f", {len(ly.dead_units)}/{ly.units} units dead" if ly.dead_units else ""
            lines.append(f"  {', '.join(ly.flags):<22} {ly.name} ({ly.type}): norm {ly.norm:.3g}{dead}")
        if self.no_grad:
            lines.append(f"  no gradient: {', '.join(self.no_grad[:5])}"
                         + (f" (+{len(self.no_grad) - 5} more)" if len(self.no_grad) > 5 else ""))
        if not self.flagged() and not self.no_grad:
            lines.append("  every layer's gradient is finite and within the thresholds")
        return "\n".join(lines)


def gradients(model: Any, config: GradientConfig | None = None) -> GradientReport:
    """Check the gradients now on `model` (after a backward): per-layer norms and flags."""
    cfg = config or GradientConfig()
    owners = [(name, m, [(f"{name}.{pn}" if name else pn, p) for pn, p in m.named_parameters(recurse=False)])
              for name, m in model.named_modules()]
    layers, no_grad, grads, dead_of = [], [], [], []
    for name, module, params in owners:
        with_grad = [(pn, p) for pn, p in params if p.grad is not None]
        no_grad += [pn for pn, p in params if p.requires_grad and p.grad is None]
        if not with_grad:
            continue
        layers.append((name or type(model).__name__, module, [pn for pn, _ in with_grad], len(grads)))
        grads += [p.grad.detach() for _, p in with_grad]
        dead_of.append(_dead_rows(module))
    norms = _fused_norms(grads)
    host = to_host([norms] + [d for d in dead_of if d is not None]) if grads else [[]]
    per_param, dead_iter = host[0], iter(host[1:])
    out = []
    for (name, module, pnames, start), dead in zip(layers, dead_of):
        sq = sum(v * v for v in per_param[start:start + len(pnames)])
        ly = LayerGrad(name, type(module).__name__, math.sqrt(sq), pnames)
        if dead is not None:
            rows = next(dead_iter)
            ly.units, ly.dead_units = len(rows), [i for i, d in enumerate(rows) if d]
        out.append(ly)
    total = math.sqrt(sum(v * v for v in per_param)) if per_param else 0.0
    median = _flag(out, cfg)
    return GradientReport(out, total, median, no_grad)


def _fused_norms(grads: list[Any]) -> Any:
    """Every gradient's 2-norm, in float32, as one device tensor (per device: the first device's)."""
    import torch

    if not grads:
        return torch.zeros(0)
    dev = grads[0].device
    return torch.stack([n.to(dev) for n in norms(grads)])


def _dead_rows(module: Any) -> Any:
    """A bool tensor per output unit (rows of the weight gradient that are all zero), or None."""
    import torch

    if not isinstance(module, (torch.nn.Linear, torch.nn.modules.conv._ConvNd)):
        return None
    w = getattr(module, "weight", None)
    if w is None or w.grad is None or w.grad.dim() < 2:
        return None
    g = w.grad.detach()
    if isinstance(module, torch.nn.modules.conv._ConvTransposeNd):
        g = g.transpose(0, 1)  # weight is [in, out/groups, ...]
    return g.flatten(1).abs().amax(1) == 0


def _flag(layers: list[LayerGrad], cfg: GradientConfig) -> float | None:
    finite = [ly.norm for ly in layers if math.isfinite(ly.norm) and ly.norm > 0]
    median = statistics.median(finite) if finite else None
    relative = median is not None and len(finite) >= cfg.min_layers
    for ly in layers:
        n = ly.norm
        if not math.isfinite(n):
            ly.flags.append("nonfinite")
            continue
        if n == 0:
            ly.flags.append("zero")
            continue
        if n < cfg.vanishing_norm or (relative and n < cfg.vanishing_ratio * median):
            ly.flags.append("vanishing")
        if n > cfg.exploding_norm or (relative and n > cfg.exploding_ratio * median):
            ly.flags.append("exploding")
        if ly.units and len(ly.dead_units) >= cfg.dead_frac * ly.units:
            ly.flags.append("dead_units")
    return median
