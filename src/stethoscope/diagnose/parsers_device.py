"""Parsers of device-side failures: CUDA OOM, NCCL, GPU hardware, asserts, cuDNN/cuBLAS, shapes."""

from __future__ import annotations

import re
from collections.abc import Sequence

from typing import Any

from stethoscope.diagnose.log_model import (
    Detail,
    Hit,
    Line,
    SIZE_RE,
    first_group,
    fmt_gib,
    hit_rank,
    size_gib,
    ranks_of,
)


# -- parsers: CUDA out of memory ----------------------------------------------------------------

_OOM_TRIED = re.compile(r"Tried to allocate " + SIZE_RE)
_OOM_TOTAL = (re.compile(r"total capac\w* of " + SIZE_RE), re.compile(SIZE_RE + r" total capacity"))
_OOM_FREE = (re.compile(r"of which " + SIZE_RE + " is free"), re.compile(r"; " + SIZE_RE + r" free\b"))
_OOM_ALLOC = (re.compile(SIZE_RE + r" is allocated by PyTorch"), re.compile(SIZE_RE + r" already allocated"))
_OOM_UNALLOC = re.compile(SIZE_RE + r" is reserved by PyTorch but unallocated")
_OOM_RESERVED = (re.compile(SIZE_RE + r" reserved in total by PyTorch"), re.compile(SIZE_RE + r" cached\)"))
_OOM_PROCESS = re.compile(r"this process has " + SIZE_RE + " memory in use")
_OOM_GPU = re.compile(r"\bGPU (\d+)")
# Fragmentation: the cache held at least the requested size, and a real share of it, yet no block fit.
FRAGMENTATION_SHARE = 0.10


def _oom_numbers(text: str) -> dict[str, float]:
    tried = size_gib(text, _OOM_TRIED)
    allocated = size_gib(text, *_OOM_ALLOC)
    unallocated = size_gib(text, _OOM_UNALLOC)
    reserved = size_gib(text, *_OOM_RESERVED)
    if unallocated is not None and allocated is not None:
        reserved = round(allocated + unallocated, 6)
    elif reserved is not None and allocated is not None:
        unallocated = round(max(reserved - allocated, 0.0), 6)
    found = {"tried_gib": tried, "total_gib": size_gib(text, *_OOM_TOTAL), "free_gib": size_gib(text, *_OOM_FREE),
             "allocated_gib": allocated, "reserved_gib": reserved, "reserved_unallocated_gib": unallocated,
             "process_gib": size_gib(text, _OOM_PROCESS)}
    return {k: v for k, v in found.items() if v is not None}


def is_fragmented(numbers: dict[str, float]) -> bool:
    """True when reserved-but-unallocated memory could have held the request yet the allocation failed."""
    unallocated = numbers.get("reserved_unallocated_gib")
    reserved = numbers.get("reserved_gib")
    if unallocated is None or not reserved:
        return False
    return unallocated >= numbers.get("tried_gib", 0.0) and unallocated >= FRAGMENTATION_SHARE * reserved


def _oom_summary(n: dict[str, float]) -> str:
    parts = []
    if "tried_gib" in n:
        parts.append(f"tried to allocate {fmt_gib(n['tried_gib'])}")
    if "free_gib" in n and "total_gib" in n:
        parts.append(f"{fmt_gib(n['free_gib'])} free of {fmt_gib(n['total_gib'])}")
    if "allocated_gib" in n and "reserved_gib" in n:
        parts.append(f"PyTorch allocated {fmt_gib(n['allocated_gib'])}, reserved {fmt_gib(n['reserved_gib'])}")
    if is_fragmented(n):
        parts.append(f"{fmt_gib(n['reserved_unallocated_gib'])} reserved but unallocated (fragmentation)")
    return "; ".join(parts)


def parse_oom(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    best = max((_oom_numbers(h.line.text) for h in hits), key=len)
    m = first_group(hits, _OOM_GPU)
    evidence: dict[str, Any] = dict(best, gpu=int(m.group(1))) if m else dict(best)
    causes: list[str] = []
    fixes: list[str] = []
    if is_fragmented(best):
        evidence["fragmented"] = True
        causes.append(f"fragmentation: {fmt_gib(best['reserved_unallocated_gib'])} is reserved by PyTorch "
                      "but unallocated, yet no free block was large enough for the request")
        fixes.append("set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (lets the caching allocator grow "
                     "segments instead of fragmenting them)")
    if best.get("tried_gib", 0.0) > best.get("total_gib", float("inf")):
        causes.append("a single tensor larger than the whole GPU was requested: a shape is far larger than "
                      "intended (fp32 logits of batch × sequence × vocab, attention scores without a fused "
                      "kernel, an accidental broadcast)")
        fixes.append("print the tensor shapes at the failing line; compute the loss in chunks or use a fused "
                     "attention kernel")
    used = best.get("total_gib", 0.0) - best.get("free_gib", 0.0)
    if "process_gib" in best and used - best["process_gib"] > 1.0:
        evidence["other_processes_gib"] = round(used - best["process_gib"], 3)
        causes.append(f"other processes hold {fmt_gib(used - best['process_gib'])} on this GPU (another job, "
                      "a leftover process from an earlier run, or two ranks on one GPU)")
        fixes.append("check `nvidia-smi` for other processes; each rank must call "
                     "torch.cuda.set_device(LOCAL_RANK)")
    return Detail(evidence=evidence, summary=_oom_summary(best), causes=tuple(causes), fixes=tuple(fixes))


# -- parsers: NCCL ------------------------------------------------------------------------------

_NCCL_WORK = re.compile(r"WorkNCCL\(SeqNum=(\d+), OpType=(\w+)(?:, NumelIn=(\d+), NumelOut=(\d+))?"
                        r"(?:, Timeout\(ms\)=(\d+))?\)(?: ran for (\d+) milliseconds)?")


def parse_nccl_timeout(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    seqs: dict[int, set[int]] = {}
    ops: set[str] = set()
    timeout_ms = ran_ms = 0
    for hit in hits:
        m = _NCCL_WORK.search(hit.line.text)
        if not m:
            continue
        rank = hit_rank(hit)
        seqs.setdefault(-1 if rank is None else rank, set()).add(int(m.group(1)))
        ops.add(m.group(2))
        timeout_ms = max(timeout_ms, int(m.group(5) or 0))
        ran_ms = max(ran_ms, int(m.group(6) or 0))
    evidence: dict[str, Any] = {"ranks": ranks_of(hits), "op_types": sorted(ops),
                                "seq_nums": {r: sorted(s) for r, s in sorted(seqs.items())}}
    if timeout_ms:
        evidence["timeout_s"] = timeout_ms / 1000
    if ran_ms:
        evidence["waited_s"] = ran_ms / 1000
    summary = ", ".join(sorted(ops)) or "collective"
    if ran_ms:
        summary += f" waited {ran_ms / 3.6e6:.1f} h" if ran_ms >= 3.6e6 else f" waited {ran_ms / 1000:.0f} s"
    if timeout_ms:
        summary += f" (timeout {timeout_ms / 60000:.0f} min)"
    causes: tuple[str, ...] = ()
    last = {r: max(s) for r, s in seqs.items() if r >= 0}
    if len(set(last.values())) > 1:
        evidence["desync"] = True
        spread = ", ".join(f"rank {r} at SeqNum {s}" for r, s in sorted(last.items()))
        causes = (f"ranks are at different collective sequence numbers ({spread}): if they share a process "
                  "group, one rank skipped or added a collective (desync) — a rank-conditional collective, "
                  "an uneven number of batches, an early break",)
    return Detail(evidence=evidence, summary=summary, causes=causes)


_NCCL_KIND = re.compile(r"(ncclUnhandledCudaError|ncclSystemError|ncclInternalError|ncclInvalidUsage|"
                        r"ncclRemoteError|ncclInvalidArgument|unhandled cuda error|unhandled system error|"
                        r"remote process exited or there was a network error|internal error|invalid usage)",
                        re.IGNORECASE)
_NCCL_VERSION = re.compile(r"NCCL version ([\d.]+\S*)")
_NCCL_KIND_CAUSE = {
    "unhandledcuda": "a CUDA call inside NCCL failed: usually a CUDA error on this rank (out of memory, "
                     "illegal memory access) — look for it just above",
    "system": "an operating-system or network call failed: /dev/shm too small in a container, "
              "InfiniBand/RoCE link down, ulimit on locked memory",
    "remote": "a peer rank died or its node lost the network: this rank is only reporting it — find the "
              "first error on the other ranks",
    "invalid": "collectives called inconsistently (different shapes/dtypes/order across ranks, or two "
               "ranks on one GPU)",
}


def parse_nccl_error(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    kinds = sorted({m.group(1) for h in hits if (m := _NCCL_KIND.search(h.line.text))})
    version = first_group(hits, _NCCL_VERSION)
    evidence: dict[str, Any] = {"errors": kinds}
    if version:
        evidence["nccl_version"] = version.group(1)
    flat = " ".join(kinds).lower().replace(" ", "")
    causes = tuple(c for key, c in _NCCL_KIND_CAUSE.items() if key in flat)
    return Detail(evidence=evidence, summary=", ".join(kinds), causes=causes)


# -- parsers: GPU hardware ----------------------------------------------------------------------

_XID = re.compile(r"\bXid\b(?:\s*\([^)]*\))?\s*:?\s*(\d+)", re.IGNORECASE)
_PCI = re.compile(r"PCI:([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.\d)?)")
# NVIDIA Xid codes that mean the hardware (or its firmware) failed; the rest are usually software.
XID_MEANING = {
    13: "graphics engine exception (often an out-of-range access in a kernel)",
    31: "GPU memory page fault (illegal address in a kernel, or driver)",
    43: "GPU stopped processing (a kernel fault)",
    45: "preemptive cleanup after an earlier error",
    48: "double-bit ECC error",
    61: "internal micro-controller breakpoint/warning",
    62: "internal micro-controller halt",
    63: "ECC page retirement / row remapping event",
    64: "ECC page retirement / row remapping failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
    140: "unrecovered ECC error",
}
HARDWARE_XIDS = frozenset({48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140})
_ECC = re.compile(r"\bECC\b|fallen off the bus|GPU is lost")


def parse_gpu_fault(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    xids = sorted({int(m.group(1)) for h in hits if (m := _XID.search(h.line.text))})
    pci = sorted({m.group(1) for h in hits if (m := _PCI.search(h.line.text))})
    evidence: dict[str, Any] = {"hardware": True}
    if xids:
        evidence["xid"] = xids
        evidence["xid_meaning"] = {x: XID_MEANING.get(x, "see NVIDIA's Xid catalogue") for x in xids}
    if pci:
        evidence["pci_bus"] = pci
    if any(_ECC.search(h.line.text) for h in hits) or set(xids) & HARDWARE_XIDS:
        names = [XID_MEANING.get(x, f"Xid {x}") for x in xids] or ["uncorrectable ECC / lost GPU"]
        return Detail(evidence=evidence, summary="; ".join(names))
    evidence["hardware"] = False
    return Detail(evidence=evidence, severity="error",
                  summary="; ".join(f"Xid {x}: {XID_MEANING.get(x, 'unknown')}" for x in xids),
                  causes=("these Xid codes usually come from a faulting kernel (out-of-range access, "
                          "driver bug), not from broken hardware — unless they recur on one node",),
                  fixes=("rerun the failing step with CUDA_LAUNCH_BLOCKING=1 to find the kernel",))


# -- parsers: device-side asserts, cuDNN/cuBLAS, shapes, devices --------------------------------

_ASSERT = re.compile(r"([\w/.-]+\.cu):(\d+): (\w+): block: \[([\d,]+)\], thread: \[([\d,]+)\] "
                     r"Assertion `(.+?)` failed")
_SEQ_TOO_LONG = re.compile(r"sequence length is longer than the specified maximum sequence length for this "
                           r"model \((\d+) > (\d+)\)")


def parse_assert(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    m = first_group(hits, _ASSERT)
    evidence: dict[str, Any] = {}
    summary = ""
    if m:
        evidence.update(kernel_file=f"{m.group(1)}:{m.group(2)}", kernel=m.group(3), assertion=m.group(6))
        summary = f"`{m.group(6)}` in {m.group(3)}"
    causes: tuple[str, ...] = ()
    long_seq = next((s for line in lines if (s := _SEQ_TOO_LONG.search(line.text))), None)
    if long_seq:
        evidence.update(sequence_length=int(long_seq.group(1)), max_length=int(long_seq.group(2)))
        causes = (f"the tokenizer warned of a sequence of {long_seq.group(1)} tokens for a model that takes "
                  f"{long_seq.group(2)}: position ids run past the position-embedding table",)
    return Detail(evidence=evidence, summary=summary, causes=causes)


_STATUS = re.compile(r"(CUDNN_STATUS_\w+|CUBLAS_STATUS_\w+|Unable to find a valid cuDNN algorithm)")
_STATUS_CAUSE = {
    "NOT_INITIALIZED": "the library could not initialise: out of GPU memory at start-up, or a CUDA/"
                       "cuDNN/driver version mismatch",
    "ALLOC_FAILED": "out of GPU memory inside the library",
    "Unable to find": "usually out of GPU memory while benchmarking algorithms (cudnn.benchmark)",
    "EXECUTION_FAILED": "a kernel failed: often an earlier asynchronous error (out-of-range index, "
                        "NaN/huge inputs) surfacing here, or a driver/library bug",
    "INTERNAL_ERROR": "a library bug or bad input (non-contiguous tensors, NaN) or an earlier "
                      "asynchronous CUDA error surfacing here",
    "NOT_SUPPORTED": "this shape/dtype/layout combination has no kernel (very large batch, odd channel "
                     "count in fp16)",
    "INVALID_VALUE": "a shape or dtype the library rejects: mismatched or zero-sized dimensions",
    "BAD_PARAM": "a shape or dtype the library rejects: mismatched or zero-sized dimensions",
}


def parse_status(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    statuses = sorted({m.group(1) for h in hits if (m := _STATUS.search(h.line.text))})
    causes = tuple(dict.fromkeys(c for s in statuses for key, c in _STATUS_CAUSE.items() if key in s))
    return Detail(evidence={"status": statuses}, summary=", ".join(statuses), causes=causes)


_MAT = re.compile(r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)")
_BROADCAST = re.compile(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at "
                        r"non-singleton dimension (\d+)")


def parse_shape(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    m = first_group(hits, _MAT)
    if m:
        rows, got, expected, out = (int(g) for g in m.groups())
        return Detail(evidence={"mat1": [rows, got], "mat2": [expected, out]},
                      summary=f"a Linear layer expects {expected} input features but got {got}",
                      causes=(f"the layer was built for in_features={expected} but the tensor reaching it has "
                              f"{got} features (hidden size / flatten size / concatenation changed)",))
    m = first_group(hits, _BROADCAST)
    if m:
        a, b, dim = (int(g) for g in m.groups())
        return Detail(evidence={"size_a": a, "size_b": b, "dim": dim},
                      summary=f"sizes {a} and {b} differ at dimension {dim}",
                      causes=("a sequence longer than the model's maximum (attention mask or position "
                              "embedding of a different length)",))
    return Detail()


_DEVICES = re.compile(r"found at least two devices, ([\w:]+) and ([\w:]+)")


def parse_devices(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    m = first_group(hits, _DEVICES)
    if not m:
        return Detail()
    return Detail(evidence={"devices": [m.group(1), m.group(2)]}, summary=f"{m.group(1)} and {m.group(2)}")
