"""Collectives: NCCL timeouts, bootstrap and NVLS failures, NCCL errors, DDP reduction."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from stethoscope.explain.model import (
    RESUME,
    Detail,
    Hit,
    Line,
    Signature,
    first_group,
    hit_rank,
    lines_after,
    ranks_of,
    rx,
)
from stethoscope.findings.catalogue import CRASH, HANG


# -- parsers ------------------------------------------------------------------------------------

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


_PARAM_INDICES = re.compile(r"did not receive grad for rank (\d+): ([\d ]+)")


def parse_unused(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    window = [line.text for h in hits for line in lines_after(h, lines, 12)]
    m = next((m for text in window if (m := _PARAM_INDICES.search(text))), None)
    if not m:
        return Detail()
    indices = [int(i) for i in m.group(2).split()]
    return Detail(evidence={"rank": int(m.group(1)), "parameter_indices": indices[:50]},
                  summary=f"{len(indices)} parameter(s) got no gradient on rank {m.group(1)}")


# -- signatures ---------------------------------------------------------------------------------

NCCL_TIMEOUT = Signature(
    "nccl_timeout", rx(r"Watchdog caught collective operation timeout", r"watchdog got stuck for",
                        r"Heartbeat monitor timed out", r"Timeout at NCCL work"),
    HANG, "critical", "NCCL collective timed out (hang)",
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
     f"{RESUME}; if it recurs on the same node, drain that node"),
    parse_nccl_timeout, role="symptom")


NCCL_BOOTSTRAP = Signature(
    "nccl_bootstrap", rx(r"Bootstrap\s*:\s*no socket interface found", r"no NCCL_SOCKET_IFNAME interface",
                          r"is neither AF_INET\(2\) nor AF_INET6", r"NET/Socket : No usable listening interface",
                          r"ncclSocketInit.*failed"),
    CRASH, "error", "NCCL could not set up its network (bootstrap)",
    ("no usable network interface: NCCL_SOCKET_IFNAME names an interface that does not exist on this "
     "node, or the container only has the loopback interface",
     "the nodes reach each other on a different interface than NCCL picked (docker/veth bridges, "
     "IPv4 vs IPv6)"),
    ("list interfaces with `ip -br addr` and set NCCL_SOCKET_IFNAME to the one that reaches the other "
     "nodes (e.g. NCCL_SOCKET_IFNAME=eth0, or exclude bridges with ^docker0,lo)",
     "in a container, run with --network=host (and --ipc=host)",
     "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET shows which interfaces NCCL considered",
     "check that MASTER_ADDR resolves to that interface; force IPv4 with NCCL_SOCKET_FAMILY=AF_INET"),
    supersedes=("nccl_error",))


NCCL_NVLS = Signature(
    "nccl_nvls", rx(r"transport/nvls\.cc:\d+ NCCL WARN", r"NVLS\b.*(?:fail|error)"),
    CRASH, "error", "NCCL NVLink SHARP (NVLS) failure",
    ("NVLS multicast is not working on this system: fabric manager down or mismatched with the driver, "
     "or an NCCL NVLS bug",),
    ("set NCCL_NVLS_ENABLE=0 (and NCCL_ALGO=^NVLS) to bypass NVLS",
     "check the fabric manager: systemctl status nvidia-fabricmanager, nvidia-smi -q | grep -i fabric; "
     "its version must match the driver",
     "update NCCL; report with NCCL_DEBUG=INFO logs if it persists"),
    supersedes=("nccl_error", "illegal_memory_access"))


DUPLICATE_GPU = Signature(
    "duplicate_gpu", rx(r"Duplicate GPU detected"),
    CRASH, "error", "Two ranks on the same GPU",
    ("the ranks did not select their own GPU: torch.cuda.set_device(LOCAL_RANK) missing",),
    ("call torch.cuda.set_device(int(os.environ['LOCAL_RANK'])) before init_process_group",),
    supersedes=("nccl_error",))


NCCL_ERROR = Signature(
    "nccl_error", rx(r"NCCL error in:", r"ncclUnhandledCudaError", r"ncclSystemError", r"ncclInternalError",
                      r"ncclRemoteError", r"ncclInvalidUsage", r"NCCL communicator was aborted",
                      r"remote process exited or there was a network error"),
    CRASH, "error", "NCCL error",
    ("see the error kinds: often a consequence of a failure on this or another rank",),
    ("find the first error on every rank; NCCL_DEBUG=INFO shows what NCCL was doing",),
    parse_nccl_error, role="symptom")


DDP_UNUSED_PARAMETERS = Signature(
    "ddp_unused_parameters", rx(r"Expected to have finished reduction in the prior iteration"),
    CRASH, "error", "DDP: some parameters got no gradient",
    ("part of the model did not take part in the loss on this step (a branch not taken, frozen "
     "layers still registered, an unused head)",),
    ("DistributedDataParallel(..., find_unused_parameters=True), or make every parameter reach the loss",
     "TORCH_DISTRIBUTED_DEBUG=DETAIL names the parameters"),
    parse_unused)
