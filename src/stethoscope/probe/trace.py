"""Per-module forward/backward timings and memory, sampled on one step in every N (opt-in: `trace_every`).

Hooks are put on the modules only for the sampled step and taken off right after, so other steps pay
nothing. Backward time is measured with tensor hooks (the gradient of a module's output arrives, then
the gradient of its input), which leave the autograd graph as it is — unlike module backward hooks,
which break models that modify tensors in place. On a GPU the host clock sees launch time, not kernel
time; memory is torch.cuda.memory_allocated() (0 on CPU).
"""

from __future__ import annotations

import sys
import time
from collections import deque
from typing import Any


class ModuleTrace:
    def __init__(self, model: Any, every: int, keep: int = 20_000) -> None:
        self.model, self.every = model, every
        self.samples: deque[tuple[int, str, str, float, float]] = deque(maxlen=keep)
        self._handles: list[Any] = []
        self._rows: list[tuple[int, str, str, float, float]] = []
        self._step: int | None = None

    def on_step(self, step: int) -> list[tuple[int, str, str, float, float]]:
        """After step `step`: collect the sampled step's rows (to store), arm the hooks for the next one if due."""
        rows = self._disarm() if self._handles else []
        if self.every and (step + 1) % self.every == 0:
            self._arm(step + 1)
        return rows

    def _arm(self, step: int) -> None:
        self._step, self._rows = step, []
        for name, module in self.model.named_modules():
            label = name or type(module).__name__
            self._handles.append(module.register_forward_pre_hook(self._pre(label)))
            self._handles.append(module.register_forward_hook(self._post(label)))

    def _disarm(self) -> list[tuple[int, str, str, float, float]]:
        for h in self._handles:
            h.remove()
        self._handles = []
        rows, self._rows = self._rows, []
        self.samples.extend(rows)
        return rows

    def _pre(self, label: str) -> Any:
        def hook(_module: Any, args: Any) -> None:
            starts = getattr(self, "_starts", None)
            if starts is None:
                starts = self._starts = {}
            starts[label] = time.perf_counter()
            for a in args if isinstance(args, tuple) else ():
                if _needs_grad(a):
                    a.register_hook(self._grad_in(label))
                    break
        return hook

    def _post(self, label: str) -> Any:
        def hook(_module: Any, _args: Any, output: Any) -> None:
            t0 = getattr(self, "_starts", {}).pop(label, None)
            if t0 is not None:
                self._rows.append((self._step or 0, label, "forward", time.perf_counter() - t0, _memory()))
            out = output[0] if isinstance(output, (tuple, list)) and output else output
            if _needs_grad(out):
                out.register_hook(self._grad_out(label))
        return hook

    def _grad_out(self, label: str) -> Any:
        def hook(_grad: Any) -> None:
            self._bwd_start = getattr(self, "_bwd_start", {})
            self._bwd_start[label] = time.perf_counter()
        return hook

    def _grad_in(self, label: str) -> Any:
        def hook(_grad: Any) -> None:
            t0 = getattr(self, "_bwd_start", {}).pop(label, None)
            if t0 is not None:
                self._rows.append((self._step or 0, label, "backward", time.perf_counter() - t0, _memory()))
        return hook

    def close(self) -> None:
        self._disarm()


def _needs_grad(t: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(t, torch.Tensor) and t.requires_grad


def _memory() -> float:
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return float(torch.cuda.memory_allocated()) / float(1 << 30)
    return 0.0
