"""Where a NaN/Inf is born: one forward and backward of the offending batch with a hook on every module.

The forward hooks fire as each module call completes (a child before its parent), so the first call
whose output holds a NaN/Inf is the innermost module that produced it; whether that call's inputs were
finite says if it made the value or received it. Gradient hooks fire in backward order (nearest the
loss first). Every count stays on the device until one transfer at the end; every hook is removed,
and the gradients, buffers and RNG state are put back, even when the pass raises.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from stethoscope.debug.examples import masked_rows
from stethoscope.debug.forward import (
    Forward,
    autocast_to,
    bad_counts,
    call_model,
    loss_of,
    norms,
    side_effects_undone,
    tensors_in,
    to_host,
)
from stethoscope.records import json_safe

_SHOWN = 5  # names listed before "(+N more)"


@dataclass
class ModuleHit:
    """The first module call whose output held a NaN/Inf."""

    name: str
    type: str
    call: int
    """Position among the forward's module calls, in completion order (0-based)."""
    calls: int
    nan: int
    inf: int
    dtype: str
    shape: list[int]
    inputs_finite: bool
    has_children: bool


@dataclass
class ParamHit:
    """The first parameter (in backward order) whose gradient held a NaN/Inf."""

    name: str
    nan: int
    inf: int
    dtype: str
    shape: list[int]


@dataclass
class NonfiniteReport:
    """What one instrumented forward and backward of a batch found; `str()` reads it out."""

    inputs_nonfinite: list[str] = field(default_factory=list)
    """The batch's tensors (as paths: `[0]`, `['input_ids']`) that held NaN/Inf before the model ran."""
    params_nonfinite: list[str] = field(default_factory=list)
    """Parameters that were already NaN/Inf before the pass (an earlier update broke them)."""
    first_output: ModuleHit | None = None
    loss: float | None = None
    first_grad: ParamHit | None = None
    grads_nonfinite: int = 0
    grads_total: int = 0
    modules_called: int = 0
    autocast: str | None = None
    backward: bool = True
    masked_examples: int = 0
    examples: int = 0
    """Examples in the batch whose labels are all -100 (ignored), of `examples` (0: no integer labels seen)."""
    step: int | None = None
    """The training step of the batch, when the Monitor ran it."""

    @property
    def found(self) -> bool:
        """Did anything in the pass hold a NaN/Inf?"""
        return bool(self.inputs_nonfinite or self.params_nonfinite or self.first_output or self.first_grad
                    or self.loss_nonfinite)

    @property
    def loss_nonfinite(self) -> bool:
        return self.loss is not None and not math.isfinite(self.loss)

    @property
    def all_masked(self) -> bool:
        return self.loss_nonfinite and self.examples > 0 and self.masked_examples == self.examples

    @property
    def verdict(self) -> str:
        """One sentence: where the first NaN/Inf came from."""
        if self.inputs_nonfinite:
            return f"the batch already held NaN/Inf ({_names(self.inputs_nonfinite)}): the data, not the model"
        if self.params_nonfinite:
            return (f"parameters were already NaN/Inf before this pass ({_names(self.params_nonfinite)}): "
                    "an earlier update broke them")
        if self.all_masked:
            return "every label in the batch is masked (-100): the mean loss over no tokens is 0/0 = NaN"
        hit = self.first_output
        if hit is not None:
            where = "in its own forward code (between its submodules)" if hit.has_children else ""
            if hit.inputs_finite:
                return f"module '{hit.name}' ({hit.type}) made {_kinds(hit)} from finite inputs {where}".rstrip()
            return (f"module '{hit.name}' ({hit.type}) received non-finite inputs from code outside any module "
                    "(a functional op in its parent's forward)")
        if self.loss_nonfinite:
            return "every module's output was finite: the loss function made the NaN/Inf (log of 0? division by 0?)"
        if self.first_grad is not None:
            return (f"the forward stayed finite; the backward made the first NaN/Inf gradient, in "
                    f"'{self.first_grad.name}'")
        return "this batch ran finite end to end with the current weights: the NaN/Inf did not reproduce"

    @property
    def next_check(self) -> str:
        """What to look at next, given the verdict."""
        if self.inputs_nonfinite:
            return "find where the data gets NaN/Inf: `stethoscope check-data FILE`, the preprocessing, the collate"
        if self.params_nonfinite:
            return ("roll back to a checkpoint from before the first non-finite grad/norm and run this on that "
                    "step's batch; lower the LR or clip gradients")
        if self.all_masked:
            return ("check the collator/truncation: a prompt longer than max length masks every answer token; "
                    "skip batches with no label tokens")
        hit = self.first_output
        if hit is not None:
            if not hit.shape:
                return (f"'{hit.name}' returns a scalar (a loss computed inside the model): check that loss on this "
                        "batch (log of 0, division by a zero count, all labels masked)")
            if hit.inf and hit.dtype in ("float16", "torch.float16"):
                return (f"'{hit.name}' overflows float16 (max 65504): use bfloat16, scale its input down, or run "
                        "it in float32")
            return (f"inspect '{hit.name}': a log/sqrt/division of 0 or a negative, an exp that overflows, a "
                    "softmax over an all-masked row; `stethoscope.debug.numerics(model, batch)` shows its scale")
        if self.loss_nonfinite:
            return "check the loss on this batch: all labels masked (-100) gives 0/0, a log of 0 gives -inf"
        if self.first_grad is not None:
            return ("a backward through sqrt/pow/norm at 0, or an fp16 gradient overflow: "
                    "`stethoscope.debug.gradients(model)` after this pass shows the layer norms")
        return ("suspect nondeterminism, a different batch, or an fp16 overflow the loss scaler skipped; "
                "rerun with the scaler's scale as loss_scale=")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(found=self.found, verdict=self.verdict, next_check=self.next_check)
        return json_safe(d)

    def __str__(self) -> str:
        step = f" (batch of step {self.step})" if self.step is not None else ""
        lines = [f"non-finite locator{step}: {self.verdict}",
                 f"  inputs      {'NaN/Inf in ' + _names(self.inputs_nonfinite) if self.inputs_nonfinite else 'finite'}",
                 f"  parameters  {'NaN/Inf before the pass: ' + _names(self.params_nonfinite) if self.params_nonfinite else 'finite'}"]
        hit = self.first_output
        if hit is None:
            lines.append(f"  forward     every output finite ({self.modules_called} module calls)")
        else:
            got = "its inputs were finite" if hit.inputs_finite else "its inputs were already non-finite"
            lines.append(f"  forward     first NaN/Inf output: '{hit.name}' ({hit.type}, call {hit.call + 1} of "
                         f"{hit.calls}): {hit.nan} NaN, {hit.inf} Inf in {hit.dtype} {hit.shape}; {got}")
        lines.append(f"  loss        {'-' if self.loss is None else f'{self.loss:.6g}'}"
                     + (f" (autocast {self.autocast})" if self.autocast else ""))
        g = self.first_grad
        if not self.backward:
            lines.append("  backward    not run (no parameter requires a gradient, or no loss)")
        elif g is None:
            lines.append(f"  backward    every gradient finite ({self.grads_total} parameters)")
        else:
            lines.append(f"  backward    first NaN/Inf gradient: '{g.name}' ({g.nan} NaN, {g.inf} Inf, {g.dtype} "
                         f"{g.shape}); {self.grads_nonfinite} of {self.grads_total} gradients non-finite")
        lines.append(f"  next        {self.next_check}")
        return "\n".join(lines)


def locate_nonfinite(model: Any, batch: Any, loss_fn: Callable[..., Any] | None = None, *,
                     forward: Forward | None = None, autocast: Any = None, loss_scale: float | None = None,
                     backward: bool = True) -> NonfiniteReport:
    """Run `batch` through `model` once, forward and backward, and report where NaN/Inf first appears.

    The batch is passed as `stethoscope.debug.forward` describes (a mapping as keywords, a tuple as
    `(inputs, *targets)` with `loss_fn(output, *targets)`, else the one argument); `forward(model,
    batch)` replaces that. `autocast` (a dtype) runs the pass under `torch.autocast` on the model's
    device (a surrounding `torch.autocast` works as well); `loss_scale` multiplies the loss before the
    backward, as an fp16 GradScaler does. The model's gradients, buffers and RNG state are restored
    afterwards and every hook removed, also when the pass raises (the exception then propagates).
    Pass the bare module, not a DistributedDataParallel wrapper (its backward would wait for the other ranks).
    """
    import torch

    report = NonfiniteReport(autocast=str(autocast).removeprefix("torch.") if autocast is not None else None)
    masked = masked_rows(batch)
    if masked is not None:
        report.masked_examples, report.examples = len(masked[0]), masked[1]
    named = [(n, p) for n, p in model.named_parameters()]
    param_flags = [(~torch.isfinite(n)).any() for n in norms([p.detach() for _, p in named])]
    input_paths, input_flags = _input_flags(batch)
    calls: list[tuple[str, Any, Any, Any, Any]] = []
    grads: list[tuple[str, Any, Any]] = []
    handles: list[Any] = []
    state = {"forward": True}
    with side_effects_undone(model):
        try:
            _hook_modules(model, calls, handles, state)
            _hook_grads(named, grads, handles)
            with torch.enable_grad():  # also when called under no_grad: the backward is half the point
                with autocast_to(model, autocast):
                    out = call_model(model, batch, forward, loss_fn)
                    loss = loss_of(out, batch, loss_fn)
                state["forward"] = False
                report.backward = backward and isinstance(loss, torch.Tensor) and loss.requires_grad
                if report.backward:
                    (loss * loss_scale if loss_scale is not None else loss).backward()
            loss_value = loss.detach().float().reshape(()) if isinstance(loss, torch.Tensor) else None
            _fill(report, named, param_flags, input_paths, input_flags, calls, grads, loss_value)
        finally:
            for h in handles:
                h.remove()
    return report


def _input_flags(batch: Any) -> tuple[list[str], list[Any]]:
    paths, flags = [], []
    for path, t in tensors_in(batch, "batch"):
        counts = bad_counts([t])
        if counts is not None:
            paths.append(path)
            flags.append(counts.sum() > 0)
    return paths, flags


def _hook_modules(model: Any, calls: list[Any], handles: list[Any], state: dict[str, bool]) -> None:
    def hook_for(name: str) -> Callable[..., None]:
        def hook(module: Any, args: Any, kwargs: Any, output: Any) -> None:
            if not state["forward"]:
                return  # a recomputation during backward (activation checkpointing)
            outs = [t for _, t in tensors_in(output)]
            counts = bad_counts(outs)
            if counts is None:
                return
            ins = bad_counts([t for _, t in tensors_in((args, kwargs))])
            first = next(t for t in outs if t.is_floating_point() or t.is_complex())
            calls.append((name or type(module).__name__, module, counts, ins, (str(first.dtype), list(first.shape))))
        return hook

    for name, module in model.named_modules():
        handles.append(module.register_forward_hook(hook_for(name), with_kwargs=True))


def _hook_grads(named: list[tuple[str, Any]], grads: list[Any], handles: list[Any]) -> None:
    def hook_for(name: str) -> Callable[[Any], None]:
        def hook(p: Any) -> None:
            if p.grad is not None:
                grads.append((name, bad_counts([p.grad]), (str(p.grad.dtype), list(p.grad.shape))))
        return hook

    for name, p in named:
        if p.requires_grad:
            handles.append(p.register_post_accumulate_grad_hook(hook_for(name)))


def _fill(report: NonfiniteReport, named: list[Any], param_flags: list[Any], input_paths: list[str],
          input_flags: list[Any], calls: list[Any], grads: list[Any], loss: Any) -> None:
    """Everything to the host in one go, then the first hits."""
    import torch

    zero = torch.zeros(2, dtype=torch.int64)
    device_vals = ([*param_flags, *input_flags] + [c[2] for c in calls]
                   + [c[3] if c[3] is not None else zero.to(c[2].device) for c in calls] + [g[1] for g in grads]
                   + ([loss] if loss is not None else []))
    host = iter(to_host(device_vals))
    params_bad = [next(host) for _ in param_flags]
    inputs_bad = [next(host) for _ in input_flags]
    outs = [next(host) for _ in calls]
    ins = [next(host) for _ in calls]
    grad_counts = [next(host) for _ in grads]
    report.loss = next(host) if loss is not None else None
    report.params_nonfinite = [n for (n, _), bad in zip(named, params_bad) if bad]
    report.inputs_nonfinite = [p for p, bad in zip(input_paths, inputs_bad) if bad]
    report.modules_called = len(calls)
    for i, ((name, module, _, _, (dtype, shape)), (nan, inf)) in enumerate(zip(calls, outs)):
        if nan or inf:
            report.first_output = ModuleHit(name, type(module).__name__, i, len(calls), int(nan), int(inf),
                                            dtype.removeprefix("torch."), shape, not any(ins[i]),
                                            any(True for _ in module.children()))
            break
    report.grads_total = len(grads)
    bad = [(g, c) for g, c in zip(grads, grad_counts) if c[0] or c[1]]
    report.grads_nonfinite = len(bad)
    if bad:
        (name, _, (dtype, shape)), (nan, inf) = bad[0]
        report.first_grad = ParamHit(name, int(nan), int(inf), dtype.removeprefix("torch."), shape)


def _kinds(hit: ModuleHit) -> str:
    return " and ".join(k for k, n in (("NaN", hit.nan), ("Inf", hit.inf)) if n)


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return shown + (f" (+{len(names) - _SHOWN} more)" if len(names) > _SHOWN else "")
