"""What `stethoscope explain` knows: one Signature per failure, kept as data.

Each record holds the regexes that recognise a failure, its finding type and severity, ranked causes
and fixes, and an optional parser that pulls the numbers out of the matching lines (OOM sizes, NCCL
sequence numbers, Xid codes, exit codes, …). The engine that applies them is `diagnose.logs`.

Roles: a `root` failure is a cause; a `symptom` (an NCCL timeout, a remote NCCL error) usually follows
another rank's failure; a `wrapper` (torchrun's ChildFailedError) only reports that a child died.
`supersedes` names less specific signatures that the same lines also match.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

# -- data model ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Line:
    """One physical line of the input, its rank prefix removed."""

    index: int  # 0-based; the line number shown to people is index + 1
    rank: int | None
    text: str


@dataclass(frozen=True, slots=True)
class Hit:
    """A line that matched one of a signature's patterns."""

    line: Line
    match: re.Match[str]


@dataclass(slots=True)
class Detail:
    """What a signature's parser adds: numbers, a one-line summary, overrides and extra hints."""

    evidence: dict[str, Any] = field(default_factory=dict)
    summary: str = ""
    severity: str | None = None
    causes: tuple[str, ...] = ()  # put before the signature's own causes
    fixes: tuple[str, ...] = ()


Parser = Callable[[list[Hit], Sequence[Line]], Detail]


@dataclass(frozen=True, slots=True)
class Signature:
    """One known failure: how to recognise it and what to tell the person who owns the run."""

    id: str
    patterns: tuple[re.Pattern[str], ...]
    type: str
    severity: str
    title: str
    causes: tuple[str, ...]
    fixes: tuple[str, ...]
    parse: Parser | None = None
    role: str = "root"  # root | symptom | wrapper
    supersedes: tuple[str, ...] = ()


def _rx(*patterns: str, flags: int = 0) -> tuple[re.Pattern[str], ...]:
    # MULTILINE: patterns run over the whole (prefix-stripped) text at once, `^`/`$` mean a line.
    return tuple(re.compile(p, flags | re.MULTILINE) for p in patterns)


# -- small parsing helpers ----------------------------------------------------------------------

_SIZE = r"([\d.]+)\s*(bytes|[KMGT]i?B|B)\b"
_PER_GIB = {"b": 2.0**-30, "bytes": 2.0**-30, "kib": 2.0**-20, "kb": 2.0**-20, "mib": 2.0**-10,
            "mb": 2.0**-10, "gib": 1.0, "gb": 1.0, "tib": 1024.0, "tb": 1024.0}
_TEXT_RANK = re.compile(r"\[(?:[^\]]*\s)?Rank (\d+)\]")


def _gib(number: str, unit: str) -> float:
    return round(float(number) * _PER_GIB[unit.lower()], 6)


def _size(text: str, *patterns: re.Pattern[str]) -> float | None:
    for pattern in patterns:
        m = pattern.search(text)
        if m:
            return _gib(m.group(1), m.group(2))
    return None


def _hit_rank(hit: Hit) -> int | None:
    if hit.line.rank is not None:
        return hit.line.rank
    m = _TEXT_RANK.search(hit.line.text)
    return int(m.group(1)) if m else None


def ranks_of(hits: list[Hit]) -> list[int]:
    """The ranks the hits came from (a line prefix or an NCCL "[Rank N]" tag), sorted."""
    return sorted({r for r in map(_hit_rank, hits) if r is not None})


def _first_group(hits: list[Hit], pattern: re.Pattern[str]) -> re.Match[str] | None:
    for hit in hits:
        m = pattern.search(hit.line.text)
        if m:
            return m
    return None


def _fmt_gib(value: float) -> str:
    return f"{value:.2f} GiB" if value >= 0.1 else f"{value * 1024:.0f} MiB"


def _after(hit: Hit, lines: Sequence[Line], count: int) -> Sequence[Line]:
    return lines[hit.line.index : hit.line.index + count]


# -- parsers: CUDA out of memory ----------------------------------------------------------------

_OOM_TRIED = re.compile(r"Tried to allocate " + _SIZE)
_OOM_TOTAL = (re.compile(r"total capac\w* of " + _SIZE), re.compile(_SIZE + r" total capacity"))
_OOM_FREE = (re.compile(r"of which " + _SIZE + " is free"), re.compile(r"; " + _SIZE + r" free\b"))
_OOM_ALLOC = (re.compile(_SIZE + r" is allocated by PyTorch"), re.compile(_SIZE + r" already allocated"))
_OOM_UNALLOC = re.compile(_SIZE + r" is reserved by PyTorch but unallocated")
_OOM_RESERVED = (re.compile(_SIZE + r" reserved in total by PyTorch"), re.compile(_SIZE + r" cached\)"))
_OOM_PROCESS = re.compile(r"this process has " + _SIZE + " memory in use")
_OOM_GPU = re.compile(r"\bGPU (\d+)")
# Fragmentation: the cache held at least the requested size, and a real share of it, yet no block fit.
FRAGMENTATION_SHARE = 0.10


def _oom_numbers(text: str) -> dict[str, float]:
    tried = _size(text, _OOM_TRIED)
    allocated = _size(text, *_OOM_ALLOC)
    unallocated = _size(text, _OOM_UNALLOC)
    reserved = _size(text, *_OOM_RESERVED)
    if unallocated is not None and allocated is not None:
        reserved = round(allocated + unallocated, 6)
    elif reserved is not None and allocated is not None:
        unallocated = round(max(reserved - allocated, 0.0), 6)
    found = {"tried_gib": tried, "total_gib": _size(text, *_OOM_TOTAL), "free_gib": _size(text, *_OOM_FREE),
             "allocated_gib": allocated, "reserved_gib": reserved, "reserved_unallocated_gib": unallocated,
             "process_gib": _size(text, _OOM_PROCESS)}
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
        parts.append(f"tried to allocate {_fmt_gib(n['tried_gib'])}")
    if "free_gib" in n and "total_gib" in n:
        parts.append(f"{_fmt_gib(n['free_gib'])} free of {_fmt_gib(n['total_gib'])}")
    if "allocated_gib" in n and "reserved_gib" in n:
        parts.append(f"PyTorch allocated {_fmt_gib(n['allocated_gib'])}, reserved {_fmt_gib(n['reserved_gib'])}")
    if is_fragmented(n):
        parts.append(f"{_fmt_gib(n['reserved_unallocated_gib'])} reserved but unallocated (fragmentation)")
    return "; ".join(parts)


def _parse_oom(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    best = max((_oom_numbers(h.line.text) for h in hits), key=len)
    m = _first_group(hits, _OOM_GPU)
    evidence: dict[str, Any] = dict(best, gpu=int(m.group(1))) if m else dict(best)
    causes: list[str] = []
    fixes: list[str] = []
    if is_fragmented(best):
        evidence["fragmented"] = True
        causes.append(f"fragmentation: {_fmt_gib(best['reserved_unallocated_gib'])} is reserved by PyTorch "
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
        causes.append(f"other processes hold {_fmt_gib(used - best['process_gib'])} on this GPU (another job, "
                      "a leftover process from an earlier run, or two ranks on one GPU)")
        fixes.append("check `nvidia-smi` for other processes; each rank must call "
                     "torch.cuda.set_device(LOCAL_RANK)")
    return Detail(evidence=evidence, summary=_oom_summary(best), causes=tuple(causes), fixes=tuple(fixes))


# -- parsers: NCCL ------------------------------------------------------------------------------

_NCCL_WORK = re.compile(r"WorkNCCL\(SeqNum=(\d+), OpType=(\w+)(?:, NumelIn=(\d+), NumelOut=(\d+))?"
                        r"(?:, Timeout\(ms\)=(\d+))?\)(?: ran for (\d+) milliseconds)?")


def _parse_nccl_timeout(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    seqs: dict[int, set[int]] = {}
    ops: set[str] = set()
    timeout_ms = ran_ms = 0
    for hit in hits:
        m = _NCCL_WORK.search(hit.line.text)
        if not m:
            continue
        rank = _hit_rank(hit)
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


def _parse_nccl_error(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    kinds = sorted({m.group(1) for h in hits if (m := _NCCL_KIND.search(h.line.text))})
    version = _first_group(hits, _NCCL_VERSION)
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


def _parse_gpu_fault(hits: list[Hit], lines: Sequence[Line]) -> Detail:
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


def _parse_assert(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    m = _first_group(hits, _ASSERT)
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


def _parse_status(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    statuses = sorted({m.group(1) for h in hits if (m := _STATUS.search(h.line.text))})
    causes = tuple(dict.fromkeys(c for s in statuses for key, c in _STATUS_CAUSE.items() if key in s))
    return Detail(evidence={"status": statuses}, summary=", ".join(statuses), causes=causes)


_MAT = re.compile(r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)")
_BROADCAST = re.compile(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at "
                        r"non-singleton dimension (\d+)")


def _parse_shape(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    m = _first_group(hits, _MAT)
    if m:
        rows, got, expected, out = (int(g) for g in m.groups())
        return Detail(evidence={"mat1": [rows, got], "mat2": [expected, out]},
                      summary=f"a Linear layer expects {expected} input features but got {got}",
                      causes=(f"the layer was built for in_features={expected} but the tensor reaching it has "
                              f"{got} features (hidden size / flatten size / concatenation changed)",))
    m = _first_group(hits, _BROADCAST)
    if m:
        a, b, dim = (int(g) for g in m.groups())
        return Detail(evidence={"size_a": a, "size_b": b, "dim": dim},
                      summary=f"sizes {a} and {b} differ at dimension {dim}",
                      causes=("a sequence longer than the model's maximum (attention mask or position "
                              "embedding of a different length)",))
    return Detail()


_DEVICES = re.compile(r"found at least two devices, ([\w:]+) and ([\w:]+)")


def _parse_devices(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    m = _first_group(hits, _DEVICES)
    if not m:
        return Detail()
    return Detail(evidence={"devices": [m.group(1), m.group(2)]}, summary=f"{m.group(1)} and {m.group(2)}")


# -- parsers: numerics --------------------------------------------------------------------------

_SCALE_NUM = r"([\d.]+(?:[eE][+-]?\d+)?)"
_ATTEMPTED = re.compile(r"Attempted loss scale: " + _SCALE_NUM)
_REDUCED = (re.compile(r"reducing to " + _SCALE_NUM), re.compile(r"reducing loss scale to " + _SCALE_NUM),
            re.compile(r"setting loss scale to:?\s*" + _SCALE_NUM))
_ANOMALY_OP = re.compile(r"Function '(\w+)' returned nan values")


def _parse_overflow(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    scales = [float(m.group(1)) for h in hits for p in (_ATTEMPTED, *_REDUCED) if (m := p.search(h.line.text))]
    low = min(scales) if scales else None
    evidence: dict[str, Any] = {"overflows": len(hits), "min_loss_scale": low}
    severity = "info"
    if low is not None and low <= 1:
        severity = "error"
    elif (low is not None and low < 128) or len(hits) >= 50:
        severity = "warning"
    summary = f"{len(hits)} skipped step(s)" + (f", loss scale fell to {low:g}" if low is not None else "")
    return Detail(evidence=evidence, summary=summary, severity=severity)


def _parse_nan(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    m = _first_group(hits, _ANOMALY_OP)
    if not m:
        return Detail(evidence={"nan_lines": len(hits)})
    return Detail(evidence={"nan_lines": len(hits), "op": m.group(1)}, summary=f"first produced by {m.group(1)}",
                  causes=(f"autograd anomaly mode names {m.group(1)} as the first op to produce NaN",))


# -- parsers: processes, launchers, files -------------------------------------------------------

_EXITCODE = re.compile(r"exitcode\s*:?\s*(-?\d+)")
_LOCAL_RANK = re.compile(r"\brank\s*:\s*(\d+)|local_rank:\s*(\d+)")
_SIGNAL = re.compile(r"Signal (\d+) \((SIG\w+)\)")
_ROOT_CAUSE = re.compile(r"Root Cause \(first observed failure\)")
EXIT_MEANING = {
    -9: "SIGKILL: killed from outside, most often by the host's out-of-memory killer",
    -6: "SIGABRT: a C++ abort (NCCL watchdog tearing the process down, an uncaught c10::Error)",
    -11: "SIGSEGV: a crash in native code (extension built for another torch/CUDA, driver)",
    -7: "SIGBUS: shared memory exhausted (DataLoader workers in a container with a small /dev/shm)",
    -15: "SIGTERM: stopped by the scheduler (time limit, preemption) or by a person",
    1: "a Python exception on that rank: its traceback is above in that rank's output",
}


def _parse_child_failed(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    window = list(dict.fromkeys(line for h in hits for line in _after(h, lines, 40)))
    texts = [line.text for line in window]
    codes = sorted({int(m.group(1)) for text in texts if (m := _EXITCODE.search(text))})
    signals = sorted({m.group(2) for text in texts if (m := _SIGNAL.search(text))})
    ranks = sorted({int(m.group(1) or m.group(2)) for text in texts if (m := _LOCAL_RANK.search(text))})
    evidence: dict[str, Any] = {"exit_codes": codes, "signals": signals, "failed_ranks": ranks}
    root = next((i for i, text in enumerate(texts) if _ROOT_CAUSE.search(text)), None)
    root_rank = root_code = None
    if root is not None:
        block = texts[root : root + 8]
        root_rank = next((int(m.group(1) or m.group(2)) for t in block if (m := _LOCAL_RANK.search(t))), None)
        root_code = next((int(m.group(1)) for t in block if (m := _EXITCODE.search(t))), None)
        evidence.update(root_cause_rank=root_rank, root_cause_exit_code=root_code)
    ordered = ([root_code] if root_code is not None else []) + [c for c in codes if c != root_code]
    causes = tuple(EXIT_MEANING[c] for c in ordered if c in EXIT_MEANING)
    summary = f"root cause rank {root_rank}, exit code {root_code}" if root_code is not None \
        else ", ".join([f"exit code {c}" for c in codes] + signals)
    return Detail(evidence=evidence, summary=summary, causes=causes)


_PORT = re.compile(r"(?:port[:= ]\s*|MASTER_PORT=|\]:|:)(\d{4,5})\b")


def _parse_port(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    window = [line.text for h in hits for line in _after(h, lines, 3)]
    port = next((m.group(1) for text in window if (m := _PORT.search(text))), None)
    if port is None:
        return Detail()
    return Detail(evidence={"port": int(port)}, summary=f"port {port}")


_MODULE = re.compile(r"No module named '([\w.]+)'")
_CANNOT_IMPORT = re.compile(r"cannot import name '(\w+)' from '([\w.]+)'")
PIP_NAMES = {"cv2": "opencv-python", "sklearn": "scikit-learn", "yaml": "pyyaml", "PIL": "pillow",
             "skimage": "scikit-image", "bs4": "beautifulsoup4", "attr": "attrs", "flash_attn": "flash-attn",
             "google.protobuf": "protobuf", "sentencepiece": "sentencepiece", "Crypto": "pycryptodome"}


def _parse_module(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    m = _first_group(hits, _MODULE)
    if m:
        name = m.group(1)
        top = name.split(".")[0]
        package = PIP_NAMES.get(name) or PIP_NAMES.get(top) or top.replace("_", "-")
        return Detail(evidence={"module": name, "package": package}, summary=f"no module named {name!r}",
                      fixes=(f"install it into the environment the job runs in: pip install {package}",))
    m = _first_group(hits, _CANNOT_IMPORT)
    if m:
        return Detail(evidence={"name": m.group(1), "module": m.group(2)},
                      summary=f"cannot import {m.group(1)!r} from {m.group(2)!r}",
                      causes=(f"the installed {m.group(2).split('.')[0]} is older or newer than the code "
                              f"expects: {m.group(1)!r} moved or does not exist in that version",))
    return Detail()


_PATH = re.compile(r"'(/[^']+)'|\"(/[^\"]+)\"")


def _parse_disk(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    m = _first_group(hits, _PATH)
    if not m:
        return Detail()
    path = m.group(1) or m.group(2)
    causes = ("/dev/shm is full: DataLoader workers pass batches through shared memory",) \
        if path.startswith("/dev/shm") else ()
    return Detail(evidence={"path": path}, summary=path, causes=causes)


_GLOBAL = re.compile(r"Unsupported global: GLOBAL ([\w.]+)")


def _parse_weights_only(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    window = [line.text for h in hits for line in _after(h, lines, 8)]
    name = next((m.group(1) for text in window if (m := _GLOBAL.search(text))), None)
    if name is None:
        return Detail()
    short = name.rsplit(".", 1)[-1]
    return Detail(evidence={"global": name}, summary=f"the checkpoint pickles {name}",
                  fixes=(f"if you trust the file: torch.serialization.add_safe_globals([{short}]) before "
                         "torch.load",))


_LFS = re.compile(r"invalid load key, 'v'")


def _parse_corrupt(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    if _first_group(hits, _LFS):
        return Detail(evidence={"git_lfs_pointer": True}, summary="the file is a git-lfs pointer, not weights",
                      causes=("the checkpoint is a git-lfs pointer file (it starts with 'version https://"
                              "git-lfs…'): the repository was cloned without `git lfs pull`",),
                      fixes=("run `git lfs pull` (or download the file itself) and load again",))
    return Detail()


_CANCEL = re.compile(r"DUE TO ([A-Z ]+?)\s*\*{3}|DUE TO ([A-Z ]+)")


def _parse_interrupt(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    m = _first_group(hits, _CANCEL)
    if not m:
        return Detail()
    reason = (m.group(1) or m.group(2)).strip().lower()
    if "node fail" in reason:
        return Detail(evidence={"reason": reason}, summary=f"cancelled due to {reason}", severity="error",
                      causes=("the node failed (hardware, network or the node daemon)",),
                      fixes=("resubmit excluding that node and report it to the cluster admins",))
    return Detail(evidence={"reason": reason}, summary=f"cancelled due to {reason}")


_PARAM_INDICES = re.compile(r"did not receive grad for rank (\d+): ([\d ]+)")


def _parse_unused(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    window = [line.text for h in hits for line in _after(h, lines, 12)]
    m = next((m for text in window if (m := _PARAM_INDICES.search(text))), None)
    if not m:
        return Detail()
    indices = [int(i) for i in m.group(2).split()]
    return Detail(evidence={"rank": int(m.group(1)), "parameter_indices": indices[:50]},
                  summary=f"{len(indices)} parameter(s) got no gradient on rank {m.group(1)}")


_KEYS = re.compile(r"(Missing|Unexpected) key\(s\) in state_dict: \"([^\"]+)\"")
_SIZE_MISMATCH = re.compile(r"size mismatch for ([\w.]+): copying a param with shape torch\.Size\(\[([\d, ]*)\]\) "
                            r"from checkpoint, the shape in current model is torch\.Size\(\[([\d, ]*)\]\)")


def _parse_state_dict(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    m = _first_group(hits, _SIZE_MISMATCH)
    if m:
        return Detail(evidence={"parameter": m.group(1), "checkpoint_shape": m.group(2), "model_shape": m.group(3)},
                      summary=f"{m.group(1)}: checkpoint [{m.group(2)}] vs model [{m.group(3)}]")
    keys = [m for h in hits if (m := _KEYS.search(h.line.text))]
    if not keys:
        return Detail()
    evidence = {"kind": keys[0].group(1).lower(), "first_key": keys[0].group(2)}
    prefixed = next((m.group(2) for m in keys if m.group(2).startswith(("module.", "_orig_mod."))), None)
    if prefixed is None:
        return Detail(evidence=evidence, summary=f"{evidence['kind']} {evidence['first_key']}")
    prefix = prefixed.split(".")[0] + "."
    wrapper = "DistributedDataParallel/DataParallel" if prefix == "module." else "torch.compile"
    return Detail(evidence=dict(evidence, prefix=prefix), summary=f"keys differ by the {prefix!r} prefix",
                  causes=(f"the keys carry the {prefix!r} prefix that {wrapper} adds: the state dict was saved "
                          "from the wrapped model and loaded into the bare one (or the reverse)",),
                  fixes=(f"strip or add the prefix ({{k.removeprefix({prefix!r}): v for k, v in sd.items()}}), or "
                         "save the unwrapped model's state_dict()",))


# -- the signature table ------------------------------------------------------------------------

_I = re.IGNORECASE
_RESUME = "resume from the last verified checkpoint"

SIGNATURES: tuple[Signature, ...] = (
    Signature(
        "gpu_hardware", _rx(r"uncorrectable ECC error", r"cudaErrorECCUncorrectable", r"(?i:\bXid\b)(?:\s*\([^)]*\))?\s*:?\s*\d+",
                            r"fallen off the bus", r"GPU is lost", r"row remapp?ing failure",
                            r"double[- ]bit ECC"),
        "crash", "critical", "GPU hardware failure",
        ("a faulty GPU (uncorrectable memory error, a GPU lost from the PCIe bus, an NVLink fault): nothing "
         "is wrong with the training itself",
         "power, cooling or PCIe seating problems on that node",),
        ("drain/cordon the node and resubmit excluding it (e.g. sbatch --exclude=NODE): the restarted job "
         "landing on the same GPU will crash again",
         f"{_RESUME}; the steps just before the crash may have used corrupted memory",
         "check the GPU: nvidia-smi -q -d ECC,ROW_REMAPPER,PAGE_RETIREMENT, `dcgmi diag -r 3`, dmesg for Xid",
         "reset the GPU or reboot the node, and open a hardware ticket if it recurs"),
        _parse_gpu_fault, supersedes=("illegal_memory_access", "cuda_error", "nccl_error")),
    Signature(
        "cuda_oom", _rx(r"CUDA out of memory", r"OutOfMemoryError", r"HIP out of memory",
                        r"CUDA error: out of memory", r"CUBLAS_STATUS_ALLOC_FAILED",
                        r"RESOURCE_EXHAUSTED: Out of memory", r"MPS backend out of memory"),
        "memory_pressure", "error", "CUDA out of memory",
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
        _parse_oom, supersedes=("cuda_error", "cudnn_cublas")),
    Signature(
        "nccl_timeout", _rx(r"Watchdog caught collective operation timeout", r"watchdog got stuck for",
                            r"Heartbeat monitor timed out", r"Timeout at NCCL work"),
        "hang", "critical", "NCCL collective timed out (hang)",
        ("another rank crashed, hung or fell far behind (data loading, checkpoint I/O, evaluation on one "
         "rank only) and never joined the collective — this timeout is usually the symptom",
         "ranks called different collectives (a collective inside `if rank == 0`, uneven batches per "
         "rank, an early break)",
         "a network, NVLink or GPU fault on one node (check dmesg for Xid errors)",
         "a legitimately long operation inside a collective exceeded the timeout (first-step compile, a "
         "large checkpoint save)"),
        ("find the earliest error in every rank's log: that rank is the cause",
         "rerun with TORCH_NCCL_DESYNC_DEBUG=1, TORCH_DISTRIBUTED_DEBUG=DETAIL and NCCL_DEBUG=INFO to see "
         "which rank is behind; TORCH_NCCL_DUMP_ON_TIMEOUT=1 dumps the flight recorder",
         "dump the stuck ranks' stacks with py-spy dump --pid PID before the job is torn down",
         "give every rank the same number of batches (drop_last=True) and keep collectives out of "
         "rank-conditional code",
         f"{_RESUME}; if it recurs on the same node, drain that node"),
        _parse_nccl_timeout, role="symptom"),
    Signature(
        "nccl_bootstrap", _rx(r"Bootstrap\s*:\s*no socket interface found", r"no NCCL_SOCKET_IFNAME interface",
                              r"is neither AF_INET\(2\) nor AF_INET6", r"NET/Socket : No usable listening interface",
                              r"ncclSocketInit.*failed"),
        "crash", "error", "NCCL could not set up its network (bootstrap)",
        ("no usable network interface: NCCL_SOCKET_IFNAME names an interface that does not exist on this "
         "node, or the container only has the loopback interface",
         "the nodes reach each other on a different interface than NCCL picked (docker/veth bridges, "
         "IPv4 vs IPv6)"),
        ("list interfaces with `ip -br addr` and set NCCL_SOCKET_IFNAME to the one that reaches the other "
         "nodes (e.g. NCCL_SOCKET_IFNAME=eth0, or exclude bridges with ^docker0,lo)",
         "in a container, run with --network=host (and --ipc=host)",
         "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET shows which interfaces NCCL considered",
         "check that MASTER_ADDR resolves to that interface; force IPv4 with NCCL_SOCKET_FAMILY=AF_INET"),
        supersedes=("nccl_error",)),
    Signature(
        "nccl_nvls", _rx(r"transport/nvls\.cc:\d+ NCCL WARN", r"NVLS\b.*(?:fail|error)"),
        "crash", "error", "NCCL NVLink SHARP (NVLS) failure",
        ("NVLS multicast is not working on this system: fabric manager down or mismatched with the driver, "
         "or an NCCL NVLS bug",),
        ("set NCCL_NVLS_ENABLE=0 (and NCCL_ALGO=^NVLS) to bypass NVLS",
         "check the fabric manager: systemctl status nvidia-fabricmanager, nvidia-smi -q | grep -i fabric; "
         "its version must match the driver",
         "update NCCL; report with NCCL_DEBUG=INFO logs if it persists"),
        supersedes=("nccl_error", "illegal_memory_access")),
    Signature(
        "device_assert_index", _rx(r"srcIndex < srcSelectDimSize", r"index out of bounds\"?` failed",
                                   r"-sizes\[i\] <= index && index < sizes\[i\]"),
        "crash", "error", "CUDA device-side assert: index out of range (embedding/index lookup)",
        ("a token id ≥ the vocabulary size: tokenizer and model disagree (special/pad tokens added without "
         "resize_token_embeddings, a tokenizer from another model)",
         "positions beyond max_position_embeddings: sequences longer than the model supports",
         "negative ids (labels such as -100 or a pad id of -1 fed as input_ids)"),
        ("check the failing batch: assert 0 <= input_ids.min() and input_ids.max() < model.config.vocab_size",
         "after adding tokens call model.resize_token_embeddings(len(tokenizer))",
         "truncate to the model's maximum length (tokenizer(..., truncation=True, max_length=...))",
         "rerun with CUDA_LAUNCH_BLOCKING=1 (or on CPU) so the error points at the real line"),
        _parse_assert, supersedes=("device_assert", "cuda_error")),
    Signature(
        "device_assert_label", _rx(r"t >= 0 && t < n_classes", r"cur_target >= 0 && cur_target < n_classes",
                                   r"target_val >= zero && target_val <= one"),
        "crash", "error", "CUDA device-side assert: label out of range in the loss",
        ("a target label outside [0, num_classes): labels not remapped to 0..C-1, num_labels set too small, "
         "a padding label other than the loss's ignore_index (-100)",),
        ("check the batch: assert ((y >= 0) & (y < num_classes)) | (y == -100)",
         "set num_labels / the output size to the real number of classes",
         "rerun with CUDA_LAUNCH_BLOCKING=1 (or on CPU) so the error points at the real line"),
        _parse_assert, supersedes=("device_assert", "cuda_error")),
    Signature(
        "device_assert_bce", _rx(r"input_val >= zero && input_val <= one"),
        "crash", "error", "CUDA device-side assert: BCE input outside [0, 1]",
        ("binary_cross_entropy got values outside [0, 1]: raw logits without a sigmoid, or NaN activations",),
        ("use BCEWithLogitsLoss on raw logits (numerically stable, works under autocast)",
         "if the inputs are NaN, treat it as a NaN problem: lower the LR, check the data"),
        _parse_assert, supersedes=("device_assert", "cuda_error")),
    Signature(
        "device_assert", _rx(r"device-side assert triggered", r"\.cu:\d+: \w+: block: \[[\d,]+\], thread"),
        "crash", "error", "CUDA device-side assert",
        ("a bounds or value check inside a CUDA kernel failed (index, label or probability out of range); "
         "the Python line in the traceback is often wrong because CUDA errors arrive asynchronously",),
        ("rerun with CUDA_LAUNCH_BLOCKING=1 (or TORCH_USE_CUDA_DSA=1, or on CPU) to get the real failing op",
         "check index and label ranges of the failing batch"),
        _parse_assert, supersedes=("cuda_error",)),
    Signature(
        "illegal_memory_access", _rx(r"an illegal memory access was encountered", r"cudaErrorIllegalAddress",
                                     r"CUDA error: misaligned address", r"an illegal instruction was encountered"),
        "crash", "error", "CUDA illegal memory access",
        ("an out-of-bounds access in a kernel: a custom/fused kernel (flash-attention, Triton, apex) or an "
         "index tensor with bad values",
         "an NCCL/NVLS or driver bug (H100/H800 systems), or a mismatched CUDA/extension build",
         "a faulty GPU, when it recurs on one node (look for Xid 13/31/43 in dmesg)"),
        ("rerun with CUDA_LAUNCH_BLOCKING=1 to find the failing op; compute-sanitizer for custom kernels",
         "if NCCL is in the stack: try NCCL_NVLS_ENABLE=0 and a newer NCCL",
         "rebuild compiled extensions against the installed torch/CUDA",
         "run the same step on another node to rule out the GPU"),
        supersedes=("cuda_error",)),
    Signature(
        "cudnn_cublas", _rx(r"CUDNN_STATUS_\w+", r"cuDNN error", r"Unable to find a valid cuDNN algorithm",
                            r"CUBLAS_STATUS_(?!ALLOC_FAILED)\w+"),
        "crash", "error", "cuDNN/cuBLAS error",
        ("an earlier asynchronous CUDA error or out-of-memory surfacing inside the library",
         "a CUDA / cuDNN / driver version mismatch",),
        ("rerun with CUDA_LAUNCH_BLOCKING=1 to see the real failing op",
         "to isolate cuDNN, set torch.backends.cudnn.enabled = False (or cudnn.benchmark = False)",
         "check versions: python -m torch.utils.collect_env"),
        _parse_status, supersedes=("cuda_error",)),
    Signature(
        "cuda_setup", _rx(r"CUDA driver version is insufficient", r"NVIDIA driver on your system is too old",
                          r"no kernel image is available for execution on the device",
                          r"no CUDA-capable device is detected", r"Found no NVIDIA driver",
                          r"is not compatible with the current PyTorch installation",
                          r"invalid device ordinal"),
        "crash", "error", "CUDA setup problem (driver, GPU architecture, visible devices)",
        ("the installed torch was built for a newer CUDA than the driver supports, or without kernels for "
         "this GPU's architecture (sm_XX)",
         "more processes than visible GPUs (--nproc_per_node larger than the GPU count, CUDA_VISIBLE_DEVICES "
         "too narrow), or no GPU visible at all in the container (missing --gpus)"),
        ("install a torch build that matches the driver/GPU (check nvidia-smi and "
         "torch.cuda.get_arch_list())",
         "set --nproc_per_node to the number of GPUs and check CUDA_VISIBLE_DEVICES",
         "run containers with --gpus all"),
        supersedes=("cuda_error",)),
    Signature(
        "fp16_loss_scale_min", _rx(r"Current loss scale already at minimum", r"Minimum loss scale reached",
                                   r"loss scale .*(?:reached|below) (?:the )?minimum", flags=_I),
        "loss_scale_collapse", "critical", "fp16 loss scale collapsed to its minimum: the run aborted",
        ("gradients overflow on every step: the loss diverged (LR too high, no warm-up) or fp16 cannot hold "
         "the activations",),
        ("train in bf16 instead of fp16 where the hardware supports it",
         "lower the learning rate or lengthen warm-up; clip gradients",
         f"{_RESUME} from before the overflows started and skip the batches around it")),
    Signature(
        "nan_loss", _rx(r"(?<![A-Za-z])loss\b['\"]?\s*(?:is|became|was|=|:)?\s*['\"]?(?:nan|-?inf)\b",
                        r"(?<![A-Za-z])grad[_ ]?norm\b['\"]?\s*(?:is|=|:)?\s*(?:nan|-?inf)\b",
                        r"Detected (?:NaN|nan|inf|non-finite) (?:values? in )?loss", r"non-finite loss",
                        r"returned nan values in its \d+\w* output", r"NaN or Inf found in input tensor",
                        flags=_I),
        "nan", "critical", "Loss or gradients became NaN/Inf",
        ("learning rate too high or warm-up too short (the loss usually spikes first)",
         "fp16 overflow: activations or gradients beyond 65504",
         "a bad batch: empty sequences or all labels masked (0/0 in the mean), corrupt samples",
         "log/sqrt/division of zero in a custom loss"),
        ("find the first non-finite step and the batch it used; rerun that step under "
         "torch.autograd.detect_anomaly() to name the op",
         "clip gradients (clip_grad_norm_ 1.0), lower the LR or lengthen warm-up",
         "use bf16 instead of fp16",
         f"{_RESUME} before the NaN and skip the offending batches"),
        _parse_nan),
    Signature(
        "fp16_overflow", _rx(r"OVERFLOW! Rank \d+ Skipping step", r"Gradient overflow\.\s+Skipping step",
                             r"overflow detected, setting loss scale to"),
        "loss_scale_collapse", "warning", "fp16 gradient overflow, steps skipped",
        ("occasional overflows are how dynamic loss scaling works; many in a row, or the scale falling low, "
         "mean the gradients are blowing up",),
        ("nothing to do for a few overflows at the start; if the scale keeps falling, lower the LR and "
         "clip gradients, or switch to bf16",),
        _parse_overflow),
    Signature(
        "dataloader_killed", _rx(r"DataLoader worker \(pid \d+\) is killed by signal: Killed"),
        "memory_pressure", "error", "DataLoader worker killed (host out of memory)",
        ("the host ran out of RAM and the kernel's OOM killer chose a DataLoader worker: too many workers, "
         "large prefetch queues, or a dataset object whose Python lists are copied into every worker",),
        ("use fewer workers (num_workers) and a smaller prefetch_factor",
         "keep dataset indices in numpy arrays or memory-mapped files, not Python lists/dicts (copy-on-read "
         "duplicates them in every worker)",
         "check host memory: dmesg | grep -i 'killed process', free -g during training"),
        supersedes=("dataloader_exited", "host_oom")),
    Signature(
        "shm_exhausted", _rx(r"killed by signal: Bus error", r"insufficient shared memory \(shm\)",
                             r"out of shared memory"),
        "memory_pressure", "error", "Shared memory (/dev/shm) exhausted by DataLoader workers",
        ("DataLoader workers hand batches over through /dev/shm, which is small in containers (64 MB by "
         "default in Docker)",),
        ("give the container more shared memory: docker run --shm-size=16g or --ipc=host",
         "use fewer workers or smaller batches per worker",
         "torch.multiprocessing.set_sharing_strategy('file_system')"),
        supersedes=("dataloader_exited",)),
    Signature(
        "host_oom", _rx(r"Signal 9 \(SIGKILL\) received", r"exitcode\s*:\s*-9\b", r"Out of memory: Kill(?:ed)? process",
                        r"oom[-_]kill(?:er)? event", r"return code = -9\b", r"Signals\.SIGKILL", r"^Killed\s*$",
                        r"exit code 137\b"),
        "memory_pressure", "error", "Process killed with SIGKILL (host out of memory)",
        ("the host ran out of RAM and the kernel's OOM killer (or the scheduler's memory limit) killed the "
         "process: loading a full checkpoint or dataset into RAM on every rank, too many DataLoader workers",
         "someone or something sent kill -9 (a scheduler enforcing a limit)"),
        ("confirm with dmesg | grep -i 'killed process' or the scheduler's job record (sacct -j JOB -o "
         "MaxRSS,State)",
         "load checkpoints with mmap=True / map_location='cpu' on one rank at a time; stream the dataset",
         "use fewer DataLoader workers; request more memory from the scheduler")),
    Signature(
        "dataloader_exited", _rx(r"DataLoader worker \(pid\(s\) [\d, ]+\) exited unexpectedly"),
        "crash", "error", "DataLoader worker exited unexpectedly",
        ("a worker died: out of host memory, out of shared memory, or a crash in native code in the "
         "dataset (image/audio decoders)",),
        ("rerun with num_workers=0 to see the real error in the main process",
         "check dmesg for the OOM killer and df -h /dev/shm")),
    Signature(
        "disk_full", _rx(r"No space left on device", r"\[Errno 28\]", r"Disk quota exceeded", r"\[Errno 122\]"),
        "crash", "error", "Disk full",
        ("checkpoints accumulating without retention, or caches (HF datasets/hub, TMPDIR, torch compile) on "
         "a small filesystem",),
        ("free space and keep only the last N checkpoints",
         "verify the last checkpoint is complete before resuming: a save interrupted by a full disk is "
         "truncated",
         "move caches to a large filesystem (HF_HOME, TMPDIR)"),
        _parse_disk),
    Signature(
        "address_in_use", _rx(r"Address already in use", r"EADDRINUSE", r"errno: 98\b",
                              r"server socket has failed to listen on any local network address"),
        "crash", "error", "Rendezvous port already in use (MASTER_PORT)",
        ("another job or a leftover process from an earlier run holds MASTER_PORT (29500 by default) on "
         "this node",),
        ("pick a free port: torchrun --master_port=PORT (e.g. derived from the job id), or "
         "--rdzv-endpoint=localhost:0 / --standalone on one node",
         "find and stop the stale process: ss -ltnp | grep PORT, or lsof -i :PORT"),
        _parse_port),
    Signature(
        "rendezvous_timeout", _rx(r"Timed out after \d+ seconds waiting for clients", r"RendezvousTimeoutError",
                                  r"client socket has timed out after", r"DistStoreError", r"connect\(\) timed out"),
        "crash", "error", "Distributed rendezvous timed out",
        ("not every node started, or they cannot reach MASTER_ADDR:MASTER_PORT (wrong address, firewall)",),
        ("check that all nodes launched with the same MASTER_ADDR/MASTER_PORT and world size",
         "test reachability from a worker: nc -zv MASTER_ADDR MASTER_PORT")),
    Signature(
        "duplicate_gpu", _rx(r"Duplicate GPU detected"),
        "crash", "error", "Two ranks on the same GPU",
        ("the ranks did not select their own GPU: torch.cuda.set_device(LOCAL_RANK) missing",),
        ("call torch.cuda.set_device(int(os.environ['LOCAL_RANK'])) before init_process_group",),
        supersedes=("nccl_error",)),
    Signature(
        "nccl_error", _rx(r"NCCL error in:", r"ncclUnhandledCudaError", r"ncclSystemError", r"ncclInternalError",
                          r"ncclRemoteError", r"ncclInvalidUsage", r"NCCL communicator was aborted",
                          r"remote process exited or there was a network error"),
        "crash", "error", "NCCL error",
        ("see the error kinds: often a consequence of a failure on this or another rank",),
        ("find the first error on every rank; NCCL_DEBUG=INFO shows what NCCL was doing",),
        _parse_nccl_error, role="symptom"),
    Signature(
        "ddp_unused_parameters", _rx(r"Expected to have finished reduction in the prior iteration"),
        "crash", "error", "DDP: some parameters got no gradient",
        ("part of the model did not take part in the loss on this step (a branch not taken, frozen "
         "layers still registered, an unused head)",),
        ("DistributedDataParallel(..., find_unused_parameters=True), or make every parameter reach the loss",
         "TORCH_DISTRIBUTED_DEBUG=DETAIL names the parameters"),
        _parse_unused),
    Signature(
        "no_grad", _rx(r"element 0 of tensors does not require grad and does not have a grad_fn"),
        "crash", "error", "Loss has no gradient",
        ("every parameter is frozen (requires_grad=False) — with PEFT and gradient checkpointing the inputs "
         "need enable_input_require_grads()",
         "the loss was computed under torch.no_grad()/inference_mode or detached (.item(), .detach(), numpy)"),
        ("check sum(p.numel() for p in model.parameters() if p.requires_grad) > 0",
         "call model.enable_input_require_grads() with gradient checkpointing on a frozen base")),
    Signature(
        "inplace_autograd", _rx(r"modified by an inplace operation", r"backward through the graph a second time"),
        "crash", "error", "Autograd graph error (in-place change or second backward)",
        ("a tensor needed for backward was changed in place (x += …, relu_(inplace=True)), or a graph is "
         "reused across steps (a tensor carried over without .detach())",),
        ("torch.autograd.set_detect_anomaly(True) names the forward op",
         "replace the in-place op by an out-of-place one; detach state carried across steps")),
    Signature(
        "device_mismatch", _rx(r"Expected all tensors to be on the same device",
                               r"Input type \(.+?\) and weight type \(.+?\) should be the same"),
        "crash", "error", "Tensors on different devices",
        ("part of the model or the batch was not moved to the GPU (a buffer created in forward on CPU, a "
         "batch not sent .to(device), a layer added after model.to())",),
        ("move the batch with .to(device) and create new tensors with device=x.device",
         "call model.to(device) after the model is fully built"),
        _parse_devices),
    Signature(
        "shape_mismatch", _rx(r"mat1 and mat2 shapes cannot be multiplied", r"must match the size of tensor b",
                              r"shape '\[[^\]]*\]' is invalid for input of size"),
        "crash", "error", "Shape mismatch",
        ("the data or the config does not match the model (hidden size, sequence length, image size)",),
        ("print the shapes at the failing line and compare with the model config",),
        _parse_shape),
    Signature(
        "state_dict_mismatch", _rx(r"size mismatch for [\w.]+: copying a param", r"Missing key\(s\) in state_dict",
                                   r"Unexpected key\(s\) in state_dict"),
        "crash", "error", "Checkpoint does not match the model",
        ("the checkpoint was saved from a different configuration (vocab resized, other hidden size or "
         "number of layers) or a differently wrapped model",),
        ("build the model with the checkpoint's config; resize embeddings before loading if tokens were "
         "added",
         "load with strict=False only after checking which keys differ"),
        _parse_state_dict),
    Signature(
        "checkpoint_corrupt", _rx(r"PytorchStreamReader failed reading zip archive", r"failed finding central directory",
                                  r"invalid load key", r"unexpected EOF, expected \d+ more bytes",
                                  r"file might be corrupted", r"HeaderTooLarge", r"Error while deserializing header",
                                  r"incomplete metadata, file not fully covered", r"EOFError: Ran out of input"),
        "crash", "error", "Checkpoint file truncated or corrupt",
        ("the save was interrupted (job killed, disk full) and left a partial file",
         "an incomplete download or copy"),
        ("compare the file size/hash with what was written (a manifest); fall back to the previous checkpoint",
         "save atomically: write to a temporary name, fsync, then rename",
         "check free disk space where checkpoints are written"),
        _parse_corrupt),
    Signature(
        "weights_only_load", _rx(r"Weights only load failed", r"WeightsUnpickler error"),
        "crash", "error", "torch.load refused the checkpoint (weights_only)",
        ("since PyTorch 2.6 torch.load defaults to weights_only=True and the file pickles Python objects "
         "(argparse.Namespace, numpy scalars, custom classes) besides tensors",),
        ("save plain state dicts (tensors, numbers, strings) instead of pickled objects",
         "for files you trust: allowlist the named globals with torch.serialization.add_safe_globals or the "
         "safe_globals context manager",
         "weights_only=False only for checkpoints you created yourself: it can run arbitrary code"),
        _parse_weights_only),
    Signature(
        "module_not_found", _rx(r"ModuleNotFoundError", r"ImportError: cannot import name"),
        "crash", "error", "Missing Python module",
        ("the package is not installed in the environment the job actually runs in (compute nodes use "
         "another Python, the venv was not activated in the job script)",
         "a local module is not on the path (run as python -m package.module from the project root)"),
        ("print sys.executable in the job to see which Python runs",),
        _parse_module),
    Signature(
        "native_abi", _rx(r"undefined symbol: \S+", r"cannot open shared object file"),
        "crash", "error", "Compiled extension or CUDA library mismatch",
        ("a compiled extension (flash-attn, apex, bitsandbytes, xformers) was built against another "
         "torch/CUDA version, or a CUDA runtime library is missing",),
        ("reinstall the extension against the installed torch (pip install --no-build-isolation "
         "--force-reinstall PACKAGE)",
         "check versions: python -m torch.utils.collect_env")),
    Signature(
        "segfault", _rx(r"Segmentation fault", r"\bSIGSEGV\b", r"exitcode\s*:\s*-11\b", r"signal 11\b"),
        "crash", "error", "Segmentation fault",
        ("a crash in native code: an extension built for another torch/CUDA, a DataLoader worker forked "
         "with threads (OpenCV, tokenizers), a driver bug",),
        ("rerun with python -X faulthandler (or PYTHONFAULTHANDLER=1) to get the Python stack",
         "rerun with num_workers=0 to see whether a DataLoader worker is the culprit",
         "rebuild/reinstall compiled extensions for the installed torch")),
    Signature(
        "compile_failed", _rx(r"BackendCompilerFailed", r"torch\._dynamo\.exc\.\w+", r"InductorError"),
        "crash", "error", "torch.compile failed",
        ("a graph break or backend failure in torch.compile for this model/version",),
        ("run without torch.compile to confirm; TORCH_LOGS=graph_breaks,recompiles shows where it fails",
         "wrap the failing region with torch.compiler.disable, or upgrade torch")),
    Signature(
        "faulthandler_timeout", _rx(r"^Timeout \(\d+:\d{2}:\d{2}\)!"),
        "hang", "error", "No progress before the faulthandler timeout (hang)",
        ("the process made no progress for the configured timeout: a collective waiting on another rank, "
         "a DataLoader deadlock, slow I/O",),
        ("read the thread stacks dumped right after this line: the main thread's innermost frame is where "
         "it waited",)),
    Signature(
        # Not torchrun's "Signal 15 (SIGTERM) received by PID": that is how it stops the other workers
        # after one failed; SignalException is torchrun itself receiving the signal.
        "interrupted", _rx(r"^KeyboardInterrupt", r"received SIGTERM", r"SignalException: Process \d+ got signal",
                           r"CANCELLED AT .* DUE TO"),
        "crash", "warning", "Run stopped by a signal (interrupt, time limit, preemption)",
        ("the job was stopped from outside: Ctrl-C, the scheduler's time limit or a preemption",),
        ("save a checkpoint when SIGTERM arrives (a handler sets a flag; the loop saves at the next step)",
         "request a signal before the limit (sbatch --signal=USR1@120) and requeue",
         _RESUME),
        _parse_interrupt),
    Signature(
        "cuda_error", _rx(r"CUDA error: [\w ]+", r"cudaError\w+"),
        "crash", "error", "CUDA error",
        ("a CUDA call failed; CUDA errors are reported asynchronously, so the line in the traceback may not "
         "be the op that failed",),
        ("rerun with CUDA_LAUNCH_BLOCKING=1 to get the real failing op",)),
    Signature(
        "child_failed", _rx(r"ChildFailedError", r"elastic\.multiprocessing\.api:failed \(exitcode"),
        "crash", "error", "A training process failed (torchrun)",
        ("torchrun only reports that a child process died: the real error is in that rank's own output",),
        ("read the traceback of the rank named as root cause (run with --tee 3 / --log-dir to keep each "
         "rank's output)",),
        _parse_child_failed, role="wrapper"),
)
