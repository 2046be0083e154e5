"""Memory: CUDA (or HIP/MPS) out of memory on the device, and the host's OOM killer."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from stethoscope.explain.model import (
    SIZE_RE,
    Detail,
    Hit,
    Line,
    Signature,
    first_group,
    fmt_gib,
    rx,
    size_gib,
)
from stethoscope.findings.catalogue import MEMORY_PRESSURE


# -- parsers ------------------------------------------------------------------------------------

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


# -- signatures ---------------------------------------------------------------------------------

CUDA_OOM = Signature(
    "cuda_oom", rx(r"CUDA out of memory", r"OutOfMemoryError", r"HIP out of memory",
                    r"CUDA error: out of memory", r"CUBLAS_STATUS_ALLOC_FAILED",
                    r"RESOURCE_EXHAUSTED: Out of memory", r"MPS backend out of memory"),
    MEMORY_PRESSURE, "error", "CUDA out of memory",
    ("activations of one micro-batch (batch size × sequence length) do not fit next to the weights, "
     "gradients and optimizer state",
     "model + gradients + optimizer state alone are too large (mixed-precision Adam needs ≈16 bytes "
     "per parameter before activations)",
     "memory grows step by step: tensors kept across steps (a loss history without .item(), a "
     "retained graph), or an unusually long batch late in the run"),
    ("halve the micro-batch and double gradient accumulation (same global batch)",
     "turn on activation checkpointing (gradient_checkpointing_enable() / torch.utils.checkpoint)",
     "train in bf16 mixed precision (torch.autocast(dtype=torch.bfloat16)) if you are in fp32",
     "shorten or cap the sequence length, pack sequences instead of padding",
     "shard parameters and optimizer state (FSDP, DeepSpeed ZeRO-2/3) or use an 8-bit optimizer",
     "see what holds memory: torch.cuda.memory._record_memory_history() and a memory snapshot"),
    parse_oom, supersedes=("cuda_error", "cudnn_cublas"))


HOST_OOM = Signature(
    "host_oom", rx(r"Signal 9 \(SIGKILL\) received", r"exitcode\s*:\s*-9\b", r"Out of memory: Kill(?:ed)? process",
                    r"oom[-_]kill(?:er)? event", r"return code = -9\b", r"Signals\.SIGKILL", r"^Killed\s*$",
                    r"exit code 137\b"),
    MEMORY_PRESSURE, "error", "Process killed with SIGKILL (host out of memory)",
    ("the host ran out of RAM and the kernel's OOM killer (or the scheduler's memory limit) killed the "
     "process: loading a full checkpoint or dataset into RAM on every rank, too many DataLoader workers",
     "someone or something sent kill -9 (a scheduler enforcing a limit)"),
    ("confirm with dmesg | grep -i 'killed process' or the scheduler's job record (sacct -j JOB -o "
     "MaxRSS,State)",
     "load checkpoints with mmap=True / map_location='cpu' on one rank at a time; stream the dataset",
     "use fewer DataLoader workers; request more memory from the scheduler"))
