"""Values the training loop hands the Monitor: detached without a copy or a sync, and brought to the host
in one transfer per device (the only host syncs, at a flush)."""

from __future__ import annotations

import contextlib
import sys
from operator import attrgetter, methodcaller
from typing import Any

_device, _dtype, _ndim, _numel = attrgetter("device"), attrgetter("dtype"), attrgetter("ndim"), methodcaller("numel")


def is_tensor(v: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(v, torch.Tensor)


def detach(v: Any) -> Any:
    """Floats pass through; tensors are detached (no copy, no sync). One outside autograd (`clip_grad_norm_`'s
    norm, an LR tensor) holds no graph: kept as it is (no new tensor object a step)."""
    if type(v) is float or type(v) is int:
        return v
    if is_tensor(v):
        if v.numel() != 1:  # metadata, no sync; a vector would fail the flush's one transfer, and every value in it
            raise ValueError(f"a value given to the Monitor must be one number, got a tensor of shape "
                             f"{tuple(v.shape)} (for a per-sample loss pass loss.mean()); this step is not recorded")
        return v.detach() if v.requires_grad else v
    return float(v)


STEP_MIN, STEP_MAX = -(2**63), 2**63 - 1  # SQLite's INTEGER


def int_step(step: Any) -> int:
    """A step given as a numpy or tensor integer, as an int; anything else (a string, None, 1.5) is refused
    with a message: it would fail the writer and the detectors later, far from the call."""
    import operator

    try:
        step = operator.index(step)
    except TypeError:
        raise TypeError(f"mon.step's step must be an int, got {type(step).__name__} {step!r}; this step is not "
                        "recorded") from None
    if not STEP_MIN <= step <= STEP_MAX:
        raise ValueError(f"mon.step's step must fit in a signed 64-bit integer (the store's), got {step}; this step "
                         "is not recorded")
    return step


def to_host(tensors: list[Any]) -> list[float]:
    """All values to the host, one transfer per device."""
    import torch

    if len(set(map(_device, tensors))) == 1 and len(set(map(_dtype, tensors))) == 1:
        with contextlib.suppress(RuntimeError):  # shapes that do not stack: the general path below
            stacked = torch.stack(tensors)
            if stacked.dim() == 1:  # the usual case, every value 0-dim: one stack, no Python per value
                if stacked.dtype != torch.float64:
                    stacked = stacked.to(torch.float64)  # one op: bf16/fp16/fp32 values read as Python floats do
                return stacked.tolist()  # host sync: one per flush
    by_device: dict[Any, list[int]] = {}
    for i, t in enumerate(tensors):
        by_device.setdefault(t.device, []).append(i)
    out = [0.0] * len(tensors)
    for idx in by_device.values():
        group = [tensors[i] for i in idx]
        dtype = group[0].dtype
        if all(t.dim() == 0 and t.dtype == dtype for t in group):  # the usual case: one stack, no per-value op
            stacked = torch.stack(group)
        else:
            stacked = torch.stack([t.reshape(()).to(torch.float64) for t in group])
        if stacked.dtype != torch.float64:
            stacked = stacked.to(torch.float64)  # one op: bf16/fp16/fp32 values read as Python floats do
        for i, v in zip(idx, stacked.tolist()):  # host sync: one per device per flush
            out[i] = v
    return out


def length(ids: Any) -> int | None:
    if ids is None:
        return None
    shape = getattr(ids, "shape", None)  # a tensor's or array's first dimension: no Tensor.__len__ in Python
    if isinstance(shape, tuple) and shape:
        return int(shape[0])
    try:
        return len(ids)
    except TypeError:
        return None


def ids_to_host(batches: list[Any]) -> list[list[Any]]:
    """Each batch's sample ids as a list; tensors go over in one transfer per device and dtype."""
    torch = sys.modules.get("torch")  # ids given as lists need no torch
    if torch is not None and set(map(type, batches)) == {torch.Tensor} and len(set(map(_device, batches))) == 1 \
            and len(set(map(_dtype, batches))) == 1 and set(map(_ndim, batches)) == {1}:
        flat = torch.cat(batches).tolist()  # host sync: one per flush (the usual case: 1-dim id tensors)
        out, start = [], 0
        for n in map(_numel, batches):
            out.append(flat[start:start + n])
            start += n
        return out
    out: list[list[Any]] = [[] for _ in batches]
    groups: dict[Any, list[int]] = {}
    for i, ids in enumerate(batches):
        if is_tensor(ids):
            groups.setdefault((ids.device, ids.dtype), []).append(i)
        else:
            out[i] = list(ids)
    if groups:
        import torch

        for idx in groups.values():
            flat = torch.cat([batches[i].reshape(-1) for i in idx]).tolist()  # host sync: one per flush
            start = 0
            for i in idx:
                n = batches[i].numel()
                out[i], start = flat[start:start + n], start + n
    return out
