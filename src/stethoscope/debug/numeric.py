"""The numbers inside a model on one sample: parameters that are NaN/Inf or extreme, activations that are
non-finite, saturated (near-zero spread) or close to their dtype's overflow, and normalisation layers
whose eps is too small for the dtype they run in.

The eps rule: a norm computes `x_centred * rsqrt(var + eps)`; on a constant row (padding, a dead
channel) var is 0, so rsqrt(eps) must be finite in the compute dtype, or 0 * inf = NaN. In float16
that needs eps >= 2.4e-10 (BERT's 1e-12 fails; it also rounds to 0 below 6e-8). bfloat16 has
float32's range, so there only eps that underflow (0, or below ~1e-38) fail. Each norm that ran is
also probed on an all-zero input of the dtype it saw: a NaN/Inf there is the bug itself, not a risk.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from stethoscope.debug.forward import (
    Forward,
    autocast_to,
    call_model,
    norms,
    side_effects_undone,
    tensors_in,
    to_host,
)
from stethoscope.records import json_safe

_EPS_ATTRS = ("eps", "variance_epsilon", "epsilon")


@dataclass
class NumericsConfig:
    """Thresholds of `numerics()`."""

    param_absmax: float = 1e3
    """A parameter with an entry larger than this in magnitude is extreme."""
    overflow_frac: float = 0.1
    """A value above this fraction of its dtype's largest finite number is near overflow."""
    saturated_std: float = 1e-6
    """An activation whose standard deviation is below this is saturated (constant)."""

    def __post_init__(self) -> None:
        for name in ("param_absmax", "overflow_frac", "saturated_std"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")


@dataclass
class Issue:
    """One numerical problem: where (`name`), what (`kind`), how bad, and the numbers."""

    where: str
    """"parameter", "activation" or "norm"."""
    name: str
    kind: str
    """parameter: nonfinite, extreme, near_overflow; activation: nonfinite, saturated, near_overflow;
    norm: eps_nan (NaN on a constant input), eps_too_small (a risk in that dtype)."""
    severity: str
    message: str
    dtype: str = ""
    values: dict[str, Any] = field(default_factory=dict)


@dataclass
class NumericsReport:
    """What `numerics()` found; `str()` reads it out."""

    issues: list[Issue]
    parameters: int
    modules_called: int
    norms_checked: list[str]

    def of(self, where: str | None = None, kind: str | None = None) -> list[Issue]:
        return [i for i in self.issues if (where is None or i.where == where) and (kind is None or i.kind == kind)]

    def to_dict(self) -> dict[str, Any]:
        return json_safe(asdict(self))

    def __str__(self) -> str:
        head = (f"numerics: {self.parameters} parameters, {self.modules_called} module calls, "
                f"{len(self.norms_checked)} norm layers; {len(self.issues)} issue(s)")
        if not self.issues:
            return head + "\n  every parameter and activation finite, none saturated, every norm eps safe"
        return "\n".join([head] + [f"  {i.severity:<8} {i.where} {i.name}: {i.message}" for i in self.issues])


def numerics(model: Any, sample: Any, config: NumericsConfig | None = None, *, forward: Forward | None = None,
             autocast: Any = None, dtype: Any = None) -> NumericsReport:
    """Check `model`'s parameters, its activations on `sample` (one forward, no gradients) and its norm
    layers' eps. `dtype` is the dtype to judge eps in (default: the dtype each norm's input had);
    `autocast` runs the forward under `torch.autocast` with that dtype. The sample is what the model is
    called with: a mapping as keywords, a tuple as positional arguments, else the one argument; or
    `forward(model, sample)`."""
    import torch

    cfg = config or NumericsConfig()
    named = list(model.named_parameters())
    p_norms = norms([p.detach() for _, p in named])
    p_max = [_absmax(p.detach()) for _, p in named]
    calls: list[tuple[str, str, Any, tuple[str, list[int]]]] = []
    seen: dict[str, Any] = {}
    handles = []
    with side_effects_undone(model):  # a training-mode forward moves BatchNorm statistics and the RNG
        try:
            for name, module in model.named_modules():
                handles.append(module.register_forward_hook(_activation_hook(name, module, calls, seen)))
            with torch.no_grad(), autocast_to(model, autocast):
                call_model(model, sample, forward)
        finally:
            for h in handles:
                h.remove()
        with torch.no_grad(), autocast_to(model, autocast):
            probes = _probe_norms(model, seen)
    host = iter(to_host(p_norms + p_max + [c[2] for c in calls] + [p for _, p in probes]))
    p_norm_h, p_max_h = [next(host) for _ in named], [next(host) for _ in named]
    act = [next(host) for _ in calls]
    probe_bad = {name: bool(next(host)) for name, _ in probes}
    issues = _param_issues(named, p_norm_h, p_max_h, cfg)
    issues += _activation_issues(calls, act, cfg, type(model).__name__)
    norm_mods = [(n, m) for n, m in model.named_modules() if _eps(m) is not None]
    issues += _norm_issues(norm_mods, seen, probe_bad, dtype)
    return NumericsReport(issues, len(named), len(calls), [n for n, _ in norm_mods])


def _absmax(t: Any) -> Any:
    import torch

    if t.numel() == 0:
        return torch.zeros((), device=t.device)
    lo, hi = torch.aminmax(t)
    return torch.maximum(hi.float(), -lo.float())


def _activation_hook(name: str, module: Any, calls: list[Any], seen: dict[str, Any]) -> Any:
    import torch

    def hook(_m: Any, args: Any, output: Any) -> None:
        floats = [t for _, t in tensors_in(output) if t.is_floating_point() and t.numel() > 0]
        if _eps(module) is not None and name not in seen:
            ins = [t for _, t in tensors_in(args) if t.is_floating_point()]
            if ins:
                seen[name] = ins[0]
        if not floats:
            return
        t = floats[0].detach()
        f = t.float()
        finite = torch.isfinite(f)
        bad = (~finite).sum().float()
        clean = torch.where(finite, f, torch.zeros((), device=f.device))
        std = clean.std() if f.numel() > 1 else torch.zeros((), device=f.device)
        stats = torch.stack([bad, std, clean.abs().max(), torch.tensor(float(f.numel()), device=f.device)])
        calls.append((name, type(module).__name__, stats, (str(t.dtype).removeprefix("torch."), list(t.shape))))
    return hook


def _probe_norms(model: Any, seen: dict[str, Any]) -> list[tuple[str, Any]]:
    """Each norm that ran, on zeros shaped like its input: is the output finite? (BatchNorm is left out:
    in training mode the probe would move its running statistics.)"""
    import torch

    modules = dict(model.named_modules())
    out = []
    for name, x in seen.items():
        module = modules.get(name)
        if module is None or isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
            continue
        y = module(torch.zeros_like(x))
        ys = [t for _, t in tensors_in(y) if t.is_floating_point()]
        if ys:
            out.append((name, (~torch.isfinite(ys[0])).any()))
    return out


def _eps(module: Any) -> float | None:
    if "norm" not in type(module).__name__.lower():
        return None
    for attr in _EPS_ATTRS:
        v = getattr(module, attr, None)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
    return None


def _param_issues(named: list[Any], p_norm: list[float], p_max: list[float], cfg: NumericsConfig) -> list[Issue]:
    import torch

    out = []
    for (name, p), n, mx in zip(named, p_norm, p_max):
        dt = str(p.dtype).removeprefix("torch.")
        limit = torch.finfo(p.dtype).max if p.is_floating_point() else math.inf
        if not math.isfinite(n) or not math.isfinite(mx):
            out.append(Issue("parameter", name, "nonfinite", "critical", "holds NaN/Inf", dt))
        elif mx > cfg.overflow_frac * limit:
            out.append(Issue("parameter", name, "near_overflow", "error",
                             f"max |value| {mx:.3g} is near the {dt} limit {limit:.3g}", dt, {"absmax": mx}))
        elif mx > cfg.param_absmax:
            out.append(Issue("parameter", name, "extreme", "warning", f"max |value| {mx:.3g} > {cfg.param_absmax:g}",
                             dt, {"absmax": mx}))
    return out


def _activation_issues(calls: list[Any], stats: list[list[float]], cfg: NumericsConfig, root: str) -> list[Issue]:
    import torch

    out, flagged, seen = [], set(), {}
    for (name, typ, _, (dt, shape)), (bad, std, absmax, numel) in zip(calls, stats):
        key = (bad, std, absmax, numel, dt)
        if name in flagged or _passed_on(name, seen.get(key)):
            continue  # a module called again, or a container returning its flagged child's output
        vals = {"std": std, "absmax": absmax, "shape": shape, "type": typ}
        shown = name or root
        limit = torch.finfo(getattr(torch, dt)).max
        if bad:
            issue = Issue("activation", shown, "nonfinite", "critical", f"{int(bad)} of {int(numel)} values NaN/Inf "
                          f"({typ}, {dt} {shape})", dt, vals)
        elif absmax > cfg.overflow_frac * limit:
            issue = Issue("activation", shown, "near_overflow", "error", f"max |value| {absmax:.3g} is near the {dt} "
                          f"limit {limit:.3g} ({typ})", dt, vals)
        elif numel > 1 and std < cfg.saturated_std:
            issue = Issue("activation", shown, "saturated", "warning", f"std {std:.3g} over {int(numel)} values: "
                          f"constant output ({typ}, {dt} {shape}; dead units, a saturated tanh/sigmoid, a zeroed layer)",
                          dt, vals)
        else:
            continue
        flagged.add(name)
        seen[key] = name
        out.append(issue)
    return out


def _passed_on(name: str, child: str | None) -> bool:
    """Is `child` (flagged with identical statistics) inside `name`, which completes after it?"""
    return child is not None and (name == "" or child.startswith(name + "."))


def _norm_issues(mods: list[Any], seen: dict[str, Any], probe_bad: dict[str, bool], dtype: Any) -> list[Issue]:
    import torch

    out = []
    for name, module in mods:
        eps = _eps(module)
        x = seen.get(name)
        dt = dtype if dtype is not None else (x.dtype if x is not None else next(
            (p.dtype for p in module.parameters()), torch.float32))
        dts = str(dt).removeprefix("torch.")
        risk = _eps_risk(eps, dt)
        vals = {"eps": eps, "type": type(module).__name__}
        if probe_bad.get(name):
            out.append(Issue("norm", name, "eps_nan", "critical", f"NaN/Inf on an all-zero {dts} input with eps="
                             f"{eps:g}: {risk or 'eps too small'}; use eps >= 1e-6 (or compute the norm in float32)",
                             dts, vals))
        elif risk:
            copes = " (this module copes: it computes in float32; a kernel or export running in " \
                    f"{dts} would not)" if name in probe_bad else ""
            out.append(Issue("norm", name, "eps_too_small", "warning", f"eps={eps:g} is too small for {dts}: "
                             f"{risk}{copes}", dts, vals))
    return out


def _eps_risk(eps: float, dtype: Any) -> str | None:
    """Why `eps` fails in `dtype` (rounds to 0, or rsqrt(eps) overflows), or None."""
    import torch

    if not dtype.is_floating_point:
        return None
    fi = torch.finfo(dtype)
    held = float(torch.tensor(eps, dtype=torch.float64).to(dtype))
    if held <= 0:
        return f"it rounds to 0 in {str(dtype).removeprefix('torch.')}"
    if 1 / math.sqrt(held) > fi.max:
        return f"rsqrt(eps) = {1 / math.sqrt(held):.3g} overflows {str(dtype).removeprefix('torch.')} (max {fi.max:.3g})"
    return None
