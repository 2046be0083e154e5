"""Host and device vital signs: RSS, CPU%, CUDA memory per device, GC pauses.

The CUDA side sits behind `DeviceMemory`, a one-method boundary: the real one asks torch.cuda,
`stethoscope.testing.FakeDeviceMemory` stands in for a GPU in tests.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from typing import Any, Protocol

from stethoscope.records import CPU_PCT, CUDA_ALLOCATED, CUDA_PEAK, CUDA_RESERVED, CUDA_TOTAL, RSS

GIB = float(1 << 30)


class DeviceMemory(Protocol):
    """Memory of every visible accelerator, in bytes: {device index: {allocated, reserved, peak, total}}."""

    def sample(self) -> dict[int, dict[str, float]]: ...


class CudaMemory:
    """torch.cuda's allocator statistics; reads only counters kept by the allocator (no device sync)."""

    def __init__(self) -> None:
        import torch

        self._cuda = torch.cuda
        self._total = {i: float(torch.cuda.get_device_properties(i).total_memory)
                       for i in range(torch.cuda.device_count())}

    def sample(self) -> dict[int, dict[str, float]]:
        c = self._cuda
        return {i: {"allocated": float(c.memory_allocated(i)), "reserved": float(c.memory_reserved(i)),
                    "peak": float(c.max_memory_allocated(i)), "total": total}
                for i, total in self._total.items()}


def default_device_memory() -> DeviceMemory | None:
    """The real CUDA boundary when torch is loaded and a GPU is present, else None."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return None
    return CudaMemory()


def device_metrics(mem: DeviceMemory) -> dict[str, float]:
    """Per-device memory in GiB; device 0 also under the plain names (memory/cuda_allocated_gib, …)."""
    out: dict[str, float] = {}
    keys = (("allocated", CUDA_ALLOCATED), ("reserved", CUDA_RESERVED), ("peak", CUDA_PEAK), ("total", CUDA_TOTAL))
    devices = sorted(mem.sample().items())
    for dev, stats in devices:
        for key, name in keys:
            if key in stats:
                out[f"{name}/cuda{dev}"] = stats[key] / GIB
                if dev == devices[0][0]:
                    out[name] = stats[key] / GIB
    return out


class HostStats:
    """This process's resident memory and CPU use, as psutil computes them (RSS from /proc/self/statm, CPU %
    of one core since the last sample). On Linux read directly: a few µs on the training thread, where
    psutil's objects and files took 50-250 µs a sample; psutil elsewhere."""

    def __init__(self) -> None:
        self._proc: Any = None
        if not os.path.exists(_STATM):
            import psutil

            self._proc = psutil.Process()
            self._proc.cpu_percent(None)  # primes the counter: the first call always answers 0.0
            return
        self._page = os.sysconf("SC_PAGE_SIZE")
        self._last = (time.monotonic(), _cpu_seconds())

    def sample(self) -> dict[str, float]:
        if self._proc is not None:
            return {RSS: self._proc.memory_info().rss / GIB, CPU_PCT: self._proc.cpu_percent(None)}
        fd = os.open(_STATM, os.O_RDONLY)
        try:
            rss = int(os.read(fd, 256).split()[1]) * self._page
        finally:
            os.close(fd)
        now, cpu = time.monotonic(), _cpu_seconds()
        (then, before), self._last = self._last, (now, cpu)
        return {RSS: rss / GIB, CPU_PCT: round((cpu - before) / (now - then) * 100, 1) if now > then else 0.0}


_STATM = "/proc/self/statm"


def _cpu_seconds() -> float:
    """User + system CPU seconds of every thread of this process (not its children), as psutil's cpu_times."""
    import resource  # Unix only: this path runs only where /proc/self/statm exists

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class GcPauses:
    """Wall time spent in the garbage collector, via gc.callbacks; `take()` returns and resets it."""

    def __init__(self) -> None:
        self._start = 0.0
        self._total = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, _info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        elif self._start:
            self._total += time.perf_counter() - self._start
            self._start = 0.0

    def take(self) -> float:
        """Seconds paused since the last call (the step's `GC_PAUSE`): a float, no dict a step."""
        total, self._total = self._total, 0.0
        return total

    def remove(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)
