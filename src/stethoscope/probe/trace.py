"""Per-module forward/backward timings and memory, sampled on one step in every N (opt-in: `trace_every`).

Hooks are put on the modules only for the sampled step and taken off right after, so other steps pay
nothing. Backward time is measured with tensor hooks (the gradient of a module's output arrives, then
the gradient of its input), which leave the autograd graph as it is — unlike module backward hooks,
which break models that modify tensors in place. A module whose inputs need no gradient (the first
layer, an embedding, the root module) gets no input gradient: its backward ends when the last gradient
inside it is made, that of one of its own parameters (a hook on each of its direct parameters: a few,
on such modules only) or the end of a submodule's backward (worked out when the step's rows are
collected, off the backward). No host sync: the host clock only. On a GPU it sees launch time, not
kernel time; memory is torch.cuda.memory_allocated() (0 on CPU).
"""

from __future__ import annotations

import sys
import time
from collections import deque
from collections.abc import Mapping
from typing import Any


class ModuleTrace:
    def __init__(self, model: Any, every: int, keep: int = 20_000) -> None:
        self.model, self.every = model, every
        self.samples: deque[tuple[int, str, str, float, float]] = deque(maxlen=keep)
        self._handles: list[Any] = []
        self._rows: list[tuple[int, str, str, float, float]] = []
        self._step: int | None = None
        self._names: dict[str, str] = {}
        self._reset()

    def _reset(self) -> None:
        self._starts: dict[str, float] = {}
        self._bwd_start: dict[str, float] = {}
        self._ends: dict[str, tuple[float, float]] = {}
        """label -> (time, memory) its backward ended: from its input's gradient, or its parameters' latest."""
        self._no_grad_in: list[str] = []

    def on_step(self, step: int) -> list[tuple[int, str, str, float, float]]:
        """After step `step`: collect the sampled step's rows (to store), arm the hooks for the next one if due."""
        rows = self._disarm() if self._handles else []
        if self.every and (step + 1) % self.every == 0:
            self._arm(step + 1)
        return rows

    def _arm(self, step: int) -> None:
        self._step, self._rows = step, []
        self._reset()
        for name, module in self.model.named_modules():
            label = name or type(module).__name__
            self._names[label] = name
            self._handles.append(module.register_forward_pre_hook(self._pre(label), with_kwargs=True))
            self._handles.append(module.register_forward_hook(self._post(label)))

    def _disarm(self) -> list[tuple[int, str, str, float, float]]:
        for h in self._handles:
            h.remove()
        self._handles = []
        self._close_inputless()
        rows, self._rows = self._rows, []
        self.samples.extend(rows)
        return rows

    def _pre(self, label: str) -> Any:
        def hook(module: Any, args: Any, kwargs: Any) -> None:
            self._starts[label] = time.perf_counter()
            for a in (*(args if isinstance(args, tuple) else ()), *(kwargs or {}).values()):
                if _needs_grad(a):
                    a.register_hook(self._grad_in(label))
                    break
            else:
                self._inputless(label, module)
        return hook

    def _inputless(self, label: str, module: Any) -> None:
        """No input needs a gradient: time its backward's end by its own parameters' gradients."""
        if label in self._no_grad_in:
            return  # called again in the same step: hooked already
        self._no_grad_in.append(label)
        for p in module.parameters(recurse=False):
            if p.requires_grad:
                self._handles.append(p.register_hook(self._grad_param(label)))

    def _grad_param(self, label: str) -> Any:
        def hook(_grad: Any) -> None:
            self._ends[label] = (time.perf_counter(), _memory())  # the last one to fire is the latest
        return hook

    def _close_inputless(self) -> None:
        """The backward rows of the modules whose inputs needed no gradient, innermost first: each ends at the
        latest of its parameters' gradients and its submodules' ends."""
        for label in reversed(self._no_grad_in):
            t0 = self._bwd_start.pop(label, None)
            prefix = self._names.get(label, label)
            inner = [end for other, end in self._ends.items()
                     if other == label or not prefix or self._names.get(other, other).startswith(prefix + ".")]
            if t0 is None or not inner:
                continue
            end, memory = max(inner)
            self._ends[label] = (end, memory)
            self._rows.append((self._step or 0, label, "backward", end - t0, memory))

    def _post(self, label: str) -> Any:
        def hook(_module: Any, _args: Any, output: Any) -> None:
            t0 = self._starts.pop(label, None)
            if t0 is not None:
                self._rows.append((self._step or 0, label, "forward", time.perf_counter() - t0, _memory()))
            out = _first_tensor(output)
            if _needs_grad(out):
                out.register_hook(self._grad_out(label))
        return hook

    def _grad_out(self, label: str) -> Any:
        def hook(_grad: Any) -> None:
            self._bwd_start[label] = time.perf_counter()
        return hook

    def _grad_in(self, label: str) -> Any:
        def hook(_grad: Any) -> None:
            t0 = self._bwd_start.pop(label, None)
            if t0 is not None:
                end, memory = time.perf_counter(), _memory()
                self._ends[label] = (end, memory)
                self._rows.append((self._step or 0, label, "backward", end - t0, memory))
        return hook

    def close(self) -> None:
        self._disarm()


def _first_tensor(output: Any) -> Any:
    """The output whose gradient arrives first: the first of a tuple, the first that needs one of a mapping
    (a Hugging Face ModelOutput: the loss when the model computes it)."""
    if isinstance(output, (tuple, list)):
        return output[0] if output else None
    if isinstance(output, Mapping):
        return next((v for v in output.values() if _needs_grad(v)), None)
    return output


def _needs_grad(t: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(t, torch.Tensor) and t.requires_grad


def _memory() -> float:
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return float(torch.cuda.memory_allocated()) / float(1 << 30)
    return 0.0
