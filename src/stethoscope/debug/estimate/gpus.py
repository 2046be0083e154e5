"""Accelerators the estimators know: memory as the driver reports it, and dense 16-bit peak FLOP/s
from the Monitor's table (capture/throughput.py: one table for live MFU and for `estimate mfu`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from stethoscope.capture.throughput import peak_flops_for
from stethoscope.errors import UsageError

MIB = 1 << 20
GIB = 1 << 30
# Memory the process cannot use for tensors: CUDA context, cuBLAS/cuDNN and NCCL workspaces.
RUNTIME_RESERVE = 1 * GIB
# The allocator's fragmentation: the estimate must stay under this share of what is left.
USABLE_SHARE = 0.95


@dataclass(frozen=True)
class Gpu:
    name: str
    memory: int  # bytes, the total nvidia-smi / rocm-smi reports
    datasheet: str  # the name the peak-FLOPs table knows it by
    aliases: tuple[str, ...] = ()

    @property
    def peak_flops(self) -> float:
        flops = peak_flops_for(self.datasheet)
        assert flops is not None, self.datasheet  # every entry here is in the table (tests check it)
        return flops

    @property
    def usable(self) -> int:
        """Bytes an estimate may fill: total less the runtime's reserve, less the fragmentation margin."""
        return int((self.memory - RUNTIME_RESERVE) * USABLE_SHARE)


# Totals as `nvidia-smi --query-gpu=memory.total` reports them (MiB), smallest first.
GPUS: tuple[Gpu, ...] = (
    Gpu("T4", 15360 * MIB, "t4"),
    Gpu("V100-16GB", 16160 * MIB, "v100", ("v100-16", "v10016gb")),
    Gpu("L4", 23034 * MIB, "l4"),
    Gpu("A10G", 23028 * MIB, "a10g"),
    Gpu("RTX 4090", 24564 * MIB, "rtx 4090", ("4090", "rtx4090")),
    Gpu("RTX 3090", 24576 * MIB, "rtx 3090", ("3090", "rtx3090")),
    Gpu("V100-32GB", 32510 * MIB, "v100", ("v100", "v100-32")),
    Gpu("A100-40GB", 40536 * MIB, "a100", ("a100-40",)),
    Gpu("L40S", 46068 * MIB, "l40s"),
    Gpu("RTX A6000", 49140 * MIB, "a6000", ("a6000",)),
    Gpu("A100-80GB", 81920 * MIB, "a100", ("a100", "a100-80")),
    Gpu("H100-80GB", 81559 * MIB, "h100", ("h100", "h100-sxm", "h800")),
    Gpu("H200-141GB", 143771 * MIB, "h200", ("h200",)),
    Gpu("B200", 183359 * MIB, "b200", ("b200-180gb",)),
    Gpu("MI300X", 196608 * MIB, "mi300x", ("mi300x-192gb",)),
)


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower().removeprefix("nvidia").removeprefix("amd"))


_BY_KEY = {_key(n): g for g in GPUS for n in (g.name, *g.aliases)}


def gpu(name: str) -> Gpu:
    """The GPU a person named ('H100', 'a100-40gb', 'RTX 4090'); an unknown name lists the known ones."""
    found = _BY_KEY.get(_key(name))
    if found is None:
        raise UsageError(f"unknown GPU {name!r}; known: {', '.join(g.name for g in GPUS)}")
    return found
