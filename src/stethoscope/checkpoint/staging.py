"""Host copies of the training state for an asynchronous save, made in one walk and one fused copy.

An async save holds the training thread only while it copies the state out of the tensors training goes
on to update; the write happens on a thread from the copy. One walk of the state dicts pairs every tensor
with a host buffer kept from the previous save (no allocation, no page faults after the first), then one
`torch._foreach_copy_` copies every CPU tensor. CUDA tensors go to pinned buffers with non-blocking copies
queued on the current stream: training's later kernels run after them in stream order, and the writer
thread, not the training thread, waits for them (`settle`). With `overlap_copy` the optimizer's own
tensors (parameters and state, which only its `step()` changes) are copied by the writer thread too,
while the next forward and backward run; a pre-hook makes that `step()` wait for the copy. A tensor that
several names share (tied weights) is copied and written once, as `torch.save` does, and a module's
state dict keeps its `_metadata`. Bench: bench/checkpoint_speed.py (`async_block` beside the per-tensor
copy it replaced, `async_overlap`).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any

_SLICE = 64 << 20  # bytes: a large tensor is copied as slices of this size, spread over the threads
_MIN_PER_THREAD = 32 << 20  # below this per thread, one more thread costs more than it saves


def _threads() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(8, cores))


def parallel_copy(torch: Any, dst: list[Any], src: list[Any]) -> None:
    """`torch._foreach_copy_(dst, src)`, spread over up to 8 threads when there is much to copy: one
    thread's memcpy moves 3-5 GB/s, so a state of several GB held the training thread for most of a sync
    save's time (73% measured on a 16-core GPU host). torch releases the GIL while it copies; contiguous
    tensors are cut into 64 MiB slices so that one large tensor is shared too."""
    sizes = [t.numel() * t.element_size() for t in src]
    total = sum(sizes)
    k = min(_threads(), total // _MIN_PER_THREAD)
    if k <= 1:
        torch._foreach_copy_(dst, src)
        return
    pieces: list[tuple[int, Any, Any]] = []
    for d, s_, n in zip(dst, src, sizes):
        if n > _SLICE and d.is_contiguous() and s_.is_contiguous() and d.dtype == s_.dtype:
            fd, fs, step = d.view(-1), s_.view(-1), max(1, _SLICE // d.element_size())
            pieces += [(min(step, fd.numel() - a) * d.element_size(), fd[a:a + step], fs[a:a + step])
                       for a in range(0, fd.numel(), step)]
        else:
            pieces.append((n, d, s_))
    groups: list[tuple[list[Any], list[Any]]] = [([], []) for _ in range(k)]
    load = [0] * k
    for n, d, s_ in sorted(pieces, key=lambda p: -p[0]):  # largest first, each to the least loaded thread
        i = load.index(min(load))
        load[i] += n
        groups[i][0].append(d)
        groups[i][1].append(s_)
    errors: list[BaseException] = []

    def run(d: list[Any], s_: list[Any]) -> None:
        try:
            torch._foreach_copy_(d, s_)
        except BaseException as exc:  # noqa: BLE001 - raised on the calling thread below
            errors.append(exc)

    helpers = [threading.Thread(target=run, args=g, name="stethoscope-copy", daemon=True) for g in groups[1:] if g[0]]
    for t in helpers:  # a thread a copy (none kept between saves): starting one costs ~0.1 ms, a slice ~10 ms
        t.start()
    run(*groups[0])
    for t in helpers:
        t.join()
    if errors:
        raise errors[0]


class HostStaging:
    """Copies (nested) state dicts into host buffers reused from one save to the next. A buffer is reused
    only after the previous save's write finished (the caller waits for it)."""

    def __init__(self) -> None:
        self._buffers: list[Any] = []  # one per distinct tensor, in the order the walk meets them
        self._pending: Any = None  # a CUDA event the last copies finish at
        self._later: tuple[list[Any], list[Any]] = ([], [])  # CPU copies `settle` makes (deferred ones)
        self.copied = threading.Event()
        """Set once every copy of the last `copy` is made (at once unless some were deferred to `settle`)."""
        self.copied.set()

    def copy(self, parts: dict[str, Any], defer: frozenset[int] = frozenset()) -> dict[str, Any]:
        """The parts with every tensor replaced by its host copy (same names, shapes, dtypes). CPU tensors at
        an address in `defer` are copied later, by `settle` on the writer thread: the caller keeps them
        unchanged until `copied` is set."""
        import torch

        walk = _Walk(self._buffers, torch, defer)
        out = {name: walk.visit(obj, name) for name, obj in parts.items()}
        self._buffers = walk.buffers
        if walk.cpu_dst:
            parallel_copy(torch, walk.cpu_dst, walk.cpu_src)
        if walk.on_cuda:
            self._pending = torch.cuda.Event()
            self._pending.record()
        self._later = walk.later
        if walk.later[0]:
            self.copied.clear()
        return out

    def settle(self) -> None:
        """Make the deferred copies and wait for the CUDA ones: the last `copy` is complete. On the writer
        thread; `copied` is set even when a copy fails (training waits for it, never forever)."""
        later, self._later = self._later, ([], [])
        try:
            if later[0]:
                import torch

                torch._foreach_copy_(*later)
            event, self._pending = self._pending, None
            if event is not None:
                event.synchronize()
        finally:
            self.copied.set()


class _Walk:
    """One pass over the state: the output structure, and the (host buffer, tensor) pairs to copy."""

    def __init__(self, old: list[Any], torch: Any, defer: frozenset[int] = frozenset()) -> None:
        self.old, self.torch, self.tensor, self.defer = old, torch, torch.Tensor, defer
        self.later: tuple[list[Any], list[Any]] = ([], [])
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
        # checked to be the same view.
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
                dst, src = self.later if ptr in self.defer else (self.cpu_dst, self.cpu_src)
                dst.append(dest)
                src.append(t)
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
