"""Gradient, parameter and update statistics, captured by optimizer step hooks.

Everything stays on the device as 0-dim tensors; the Monitor moves them to the host once per flush.
One fused `torch._foreach_norm` call gives every per-tensor norm at once; the global norm is the
norm of that vector. Never `p.grad.norm().item()` per parameter (one host sync per tensor on a GPU).
"""

from __future__ import annotations

import operator
from itertools import repeat
from typing import Any

from stethoscope.records import GRAD_NORM, GRAD_ZERO_FRAC, LR, PARAM_NORM, UPDATE_RATIO


class _Taken:
    """A hook's values since the last `take()`, handed over once."""

    _values: dict[str, Any]

    def take(self) -> dict[str, Any] | None:
        """The values captured since the last call, or None (no new dict a step when there were none)."""
        captured = self._values
        if not captured:
            return None
        self._values = {}
        return captured


class LrUsed(_Taken):
    """The LR of each param group when `optimizer.step()` runs: the one the update used, whether the loop
    steps its scheduler before or after `Monitor.step` (read at `Monitor.step`, the former would give the
    next step's LR)."""

    def __init__(self, optimizer: Any) -> None:
        self._opt = optimizer
        self._values: dict[str, Any] = {}
        self._handle = optimizer.register_step_pre_hook(self._pre)

    def _pre(self, *_: Any) -> None:
        for i, group in enumerate(self._opt.param_groups):
            lr = group.get("lr")
            if lr is not None:
                self._values[LR if i == 0 else f"{LR}/group{i}"] = lr.detach() if hasattr(lr, "detach") else lr

    def remove(self) -> None:
        self._handle.remove()


class GradStats(_Taken):
    """Hooks one optimizer; `take()` returns the device-side values captured since the last call."""

    def __init__(self, optimizer: Any, names: dict[int, str], mode: str = "global",
                 layers_every: int = 50, details_every: int = 10, update_max_bytes: int = 256 << 20) -> None:
        import torch  # lazy: the core imports without torch

        self._torch = torch
        self._opt = optimizer
        self._names = names
        self._mode = mode
        self._layers_every = layers_every
        self._details_every = details_every
        self._update_max_bytes = update_max_bytes
        self.step = 0
        self.skip_global = False  # set once the user hands us the norm clip_grad_norm_ returned
        self._values: dict[str, Any] = {}
        self._snapshot: tuple[list[Any], list[Any], Any] | None = None
        self._layout: tuple[Any, ...] = ()  # the param groups' lists and lengths the cache below was made from
        self._all: list[Any] = []
        self._sized: tuple[list[Any], int, list[Any]] = ([], 0, [])  # params, their numel, the update's sample
        self._handles = [optimizer.register_step_pre_hook(self._pre), optimizer.register_step_post_hook(self._post)]

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []

    # -- hooks ---------------------------------------------------------------------------------
    def _params(self) -> list[Any]:
        groups = self._opt.param_groups
        layout = tuple((id(g["params"]), len(g["params"])) for g in groups)
        if layout != self._layout:  # a param group added or changed: flatten again (not every step)
            self._layout, self._all = layout, [p for g in groups for p in g["params"]]
        return self._all

    def _pre(self, *_: Any) -> None:
        params = self._params()
        grads = [p.grad for p in params]
        if any(map(operator.is_, grads, repeat(None))):  # identity in C (`in` would call Tensor.__eq__)
            params = [p for p, g in zip(params, grads) if g is not None]
            grads = [g for g in grads if g is not None]
        if not params:
            return
        torch = self._torch
        details = self.step % self._details_every == 0
        layers = self._mode == "layers" and self.step % self._layers_every == 0
        with torch.no_grad():  # no autograd records, so no per-tensor detach: fused ops over the lists only
            if not self.skip_global or layers:
                norms = torch._foreach_norm(grads)
                self._values[GRAD_NORM] = torch.linalg.vector_norm(torch.stack(norms))
                if layers:
                    self._record_layers(params, norms)
            if details:
                self._record_details(params, grads)

    def _record_layers(self, params: list[Any], norms: list[Any]) -> None:
        for p, n in zip(params, norms):
            self._values[f"grad/norm/{self._names.get(id(p), f'param{id(p)}')}"] = n

    def _record_details(self, params: list[Any], grads: list[Any]) -> None:
        # A handful of fused ops over all parameters, whatever their number (no Python loop of torch ops).
        torch = self._torch
        total, sample = self._sizes(params)
        nonzero = torch.stack(torch._foreach_norm(grads, 0)).sum()  # the L0 "norm" counts non-zero entries
        self._values[GRAD_ZERO_FRAC] = 1.0 - nonzero / total
        self._values[PARAM_NORM] = param_norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(params)))
        if sample:
            # Copy of at most update_max_bytes (one fused op): the update is measured on this sample of tensors;
            # when it holds every parameter, their norm before the update is the one just taken.
            self._snapshot = (sample, torch._foreach_mul(sample, 1.0), param_norm if sample is params else None)

    def _sizes(self, params: list[Any]) -> tuple[int, list[Any]]:
        """The parameters' element count and the update's sample (what fits in update_max_bytes, in order):
        Python over every parameter once per parameter list, not every `details_every` steps."""
        cached, total, sample = self._sized
        if len(cached) == len(params) and all(map(operator.is_, cached, params)):
            return total, (params if sample is cached else sample)
        budget, sample = self._update_max_bytes, []
        for p in params:
            size = p.numel() * p.element_size()
            if size > budget:
                continue
            budget -= size
            sample.append(p)
        total = sum(p.numel() for p in params)
        self._sized = (params, total, params if len(sample) == len(params) else sample)
        return total, (params if len(sample) == len(params) else sample)

    def _post(self, *_: Any) -> None:
        self.step += 1
        if self._snapshot is None:
            return
        torch = self._torch
        sample, before, par = self._snapshot
        self._snapshot = None
        with torch.no_grad():
            delta = torch._foreach_sub(sample, before)
            upd = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(delta)))
            if par is None:
                par = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(before)))
            self._values[UPDATE_RATIO] = upd / par.clamp_min(1e-12)
