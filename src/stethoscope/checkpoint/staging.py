"""Host copies of the training state for an asynchronous save, made in one walk and one fused copy.

An async save holds the training thread only while it copies the state out of the tensors training goes
on to update; the write happens on a thread from the copy. One walk of the state dicts pairs every tensor
with a host buffer kept from the previous save (no allocation, no page faults after the first), then one
`torch._foreach_copy_` copies every CPU tensor. CUDA tensors go to pinned buffers with non-blocking copies
queued on the current stream: training's later kernels run after them in stream order, and the writer
thread, not the training thread, waits for them (`settle`). A tensor that several names share (tied
weights) is copied and written once, as `torch.save` does, and a module's state dict keeps its `_metadata`.
Bench: bench/checkpoint_speed.py (`async_block`, and the per-tensor copy it replaced).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any


class HostStaging:
    """Copies (nested) state dicts into host buffers reused from one save to the next. A buffer is reused
    only after the previous save's write finished (the caller waits for it)."""

    def __init__(self) -> None:
        self._buffers: list[Any] = []  # one per distinct tensor, in the order the walk meets them
        self._pending: Any = None  # a CUDA event the last copies finish at

    def copy(self, parts: dict[str, Any]) -> dict[str, Any]:
        """The parts with every tensor replaced by its host copy (same names, shapes, dtypes)."""
        import torch

        walk = _Walk(self._buffers, torch)
        out = {name: walk.visit(obj, name) for name, obj in parts.items()}
        self._buffers = walk.buffers
        if walk.cpu_dst:
            torch._foreach_copy_(walk.cpu_dst, walk.cpu_src)
        if walk.on_cuda:
            self._pending = torch.cuda.Event()
            self._pending.record()
        return out

    def settle(self) -> None:
        """Wait until the last `copy` is complete (CUDA copies run after it returns); on the writer thread."""
        event, self._pending = self._pending, None
        if event is not None:
            event.synchronize()


class _Walk:
    """One pass over the state: the output structure, and the (host buffer, tensor) pairs to copy."""

    def __init__(self, old: list[Any], torch: Any) -> None:
        self.old, self.torch, self.tensor = old, torch, torch.Tensor
        self.buffers: list[Any] = []
        self.src: dict[int, tuple[str, Any, Any]] = {}  # address → (part, tensor, its copy)
        self.cpu_dst: list[Any] = []
        self.cpu_src: list[Any] = []
        self.on_cuda = False

    def visit(self, obj: Any, part: str) -> Any:
        if isinstance(obj, self.tensor):
            return self.stage(obj.detach() if obj.requires_grad else obj, part)  # state dicts hold detached ones
        if isinstance(obj, dict):
            return _like(obj, {k: self.visit(v, part) for k, v in obj.items()})
        if isinstance(obj, (list, tuple)):
            return type(obj)(self.visit(v, part) for v in obj)
        return obj

    def stage(self, t: Any, part: str) -> Any:
        # One copy per distinct tensor in a part (not across parts: each file must hold its own). Keyed by the
        # address alone (CUDA's unified addressing keeps it unique across devices); the rare repeat is then
        # checked to be the same view. Tuples as keys cost ~30% more here (3,200 tensors): GC work.
        ptr = t.data_ptr()
        same = self.src.get(ptr) if t.numel() else None
        if same is not None and same[0] == part and _same_view(same[1], t):
            return same[2]
        if type(t) is not self.tensor or t.layout != self.torch.strided or t.is_quantized:
            dest = t.to("cpu", copy=True)  # sparse, quantized, a tensor subclass: a fresh copy of its own
        else:
            i = len(self.buffers)
            buf = self.old[i] if i < len(self.old) else None
            pinned = not t.is_cpu and self.torch.cuda.is_available()
            if buf is None or buf.shape != t.shape or buf.dtype != t.dtype or (pinned and not buf.is_pinned()):
                buf = self.torch.empty(t.shape, dtype=t.dtype, pin_memory=pinned)
            self.buffers.append(buf)
            dest = buf
            if t.is_cpu:
                self.cpu_dst.append(dest)
                self.cpu_src.append(t)
            else:
                dest.copy_(t, non_blocking=True)
                self.on_cuda = True
        self.src[ptr] = (part, t, dest)
        return dest


def _same_view(a: Any, b: Any) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride() and a.device == b.device


def _like(obj: dict[Any, Any], items: dict[Any, Any]) -> dict[Any, Any]:
    """`items` as the kind of dict `obj` is: a module's state dict (an OrderedDict) keeps its `_metadata`
    (the versions `load_state_dict` migrates by)."""
    if not isinstance(obj, OrderedDict):
        return items
    out = OrderedDict(items)
    if hasattr(obj, "_metadata"):
        out._metadata = obj._metadata  # type: ignore[attr-defined]
    return out
