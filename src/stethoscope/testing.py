"""Public fakes for the boundaries stethoscope cannot reach in a test: a GPU, a clock, a sink.

Everything else in tests runs for real (SQLite files, threads, subprocesses, torch on CPU).
"""

from __future__ import annotations

import errno
import math
import os
import random
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass
class FakeDeviceMemory:
    """Stands in for torch.cuda's allocator counters: `devices` maps index → bytes per key.

    `grow_per_sample` adds bytes to "allocated" (and "peak") on every sample, to fake a leak.
    """

    devices: dict[int, dict[str, float]] = field(default_factory=lambda: {
        0: {"allocated": 2.0 * (1 << 30), "reserved": 3.0 * (1 << 30), "peak": 2.5 * (1 << 30),
            "total": 80.0 * (1 << 30)}})
    grow_per_sample: float = 0.0
    samples: int = 0

    def sample(self) -> dict[int, dict[str, float]]:
        self.samples += 1
        for stats in self.devices.values():
            stats["allocated"] += self.grow_per_sample
            stats["peak"] = max(stats["peak"], stats["allocated"])
        return {dev: dict(stats) for dev, stats in self.devices.items()}


class FakeClock:
    """A clock that moves only when told to: `clock()` reads it, `advance(s)` moves it."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


# Ops that, on a GPU, make the host wait for the device: reading a value (item, float, bool) or
# producing a tensor whose shape depends on the data.
_HOST_READ_OPS = frozenset({"_local_scalar_dense", "nonzero", "masked_select", "unique", "_unique2",
                            "unique_consecutive", "unique_dim", "equal", "is_nonzero"})


@dataclass
class HostReads:
    """What `count_host_reads` saw on the calling thread: total and per operation."""

    by_op: Counter[str] = field(default_factory=Counter)

    @property
    def count(self) -> int:
        return sum(self.by_op.values())


@contextmanager
def count_host_reads() -> Iterator[HostReads]:
    """Count, on the calling thread, the tensor reads that would stall a GPU: item()/float()/bool(),
    data-dependent shapes, tolist(), numpy() and copies from a device to the host.

    Works on CPU tensors too: on a CPU these cost nothing, but the same code on a GPU pays one
    host sync each, which is what the Monitor must never do per step.
    """
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = HostReads()
    me = threading.get_ident()

    class _Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            name = func.overloadpacket.__name__
            if name in _HOST_READ_OPS or (name == "_to_copy" and _to_host_copy(args, kwargs)):
                seen.by_op[name] += 1
            return func(*args, **(kwargs or {}))

    originals = {m: getattr(torch.Tensor, m) for m in ("tolist", "numpy")}
    own = {m for m in originals if m in vars(torch.Tensor)}

    def _counted(method: str) -> Any:
        original = originals[method]

        def wrapper(self: Any, *a: Any, **k: Any) -> Any:
            if threading.get_ident() == me:
                seen.by_op[method] += 1
            return original(self, *a, **k)
        return wrapper

    for m in originals:
        setattr(torch.Tensor, m, _counted(m))
    try:
        with _Mode():
            yield seen
    finally:
        for m, original in originals.items():
            if m in own:
                setattr(torch.Tensor, m, original)
            else:
                delattr(torch.Tensor, m)  # it was inherited from TensorBase


def top_level_ops(prof: Any) -> int:
    """The aten ops a `torch.profiler` profile saw dispatched from Python: those with no aten op above
    them. A fused `torch._foreach_*` op is one (one multi-tensor kernel chain on a GPU); the per-tensor
    ops the CPU runs under it are not counted."""
    n = 0
    for e in prof.events():
        if not e.name.startswith("aten::"):
            continue
        p = e.cpu_parent
        while p is not None and not p.name.startswith("aten::"):
            p = p.cpu_parent
        n += p is None
    return n


def _to_host_copy(args: Any, kwargs: Any) -> bool:
    device = (kwargs or {}).get("device")
    return bool(args) and device is not None and str(device) == "cpu" and args[0].device.type != "cpu"


def loss_curve(steps: int, start: float = 4.0, floor: float = 1.5, tau: float = 300.0,
               noise: float = 0.02, seed: int = 0) -> list[float]:
    """A healthy exponentially decaying loss with multiplicative noise (seeded)."""
    rng = random.Random(seed)
    return [floor + (start - floor) * math.exp(-s / tau) * (1 + rng.gauss(0, noise)) + rng.gauss(0, noise)
            for s in range(steps)]


def write_curve(path: str, steps: Sequence[int], values: Sequence[float]) -> None:
    """Write a golden curve as plain `step value` lines."""
    with open(path, "w", encoding="utf-8") as f:
        for s, v in zip(steps, values):
            f.write(f"{s} {v!r}\n")


def read_curve(path: str) -> tuple[list[int], list[float]]:
    steps, values = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                s, v = line.split()
                steps.append(int(s))
                values.append(float(v))
    return steps, values


class FullDisk:
    """Wraps a real `RunStore`; while `full` is set every write raises `OSError(ENOSPC)`, as a full
    disk would, and `refused` counts them. Pass it as `Monitor(..., store=FullDisk(RunStore(path)))`.
    """

    def __init__(self, store: Any, full: bool = False) -> None:
        self.store = store
        self.full = full
        self.refused = 0

    def _check(self) -> None:
        if self.full:
            self.refused += 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.store.path))

    def write_points(self, points: Any) -> int:
        self._check()
        return self.store.write_points(points)

    def write_findings(self, findings: Any, time_s: float | None = None) -> None:
        self._check()
        self.store.write_findings(findings, time_s)

    def write_batches(self, batches: Any) -> None:
        self._check()
        self.store.write_batches(batches)

    def set_meta(self, items: Any) -> None:
        self._check()
        self.store.set_meta(items)

    def close(self) -> None:
        self.store.close()


def __getattr__(name: str) -> Any:
    """`MemoryChannel` (alerts kept in a list) comes from `stethoscope.act`, imported only when asked for."""
    if name == "MemoryChannel":
        from stethoscope.act.channels.memory import MemoryChannel

        return MemoryChannel
    raise AttributeError(f"module 'stethoscope.testing' has no attribute {name!r}")


# -- exporters (issue 13) ----------------------------------------------------------------------------
class MemoryExporter:
    """An exporter (see `stethoscope.exporters.base.Exporter`) that keeps what it is given in lists;
    `fail` makes every write raise, as a tool whose server went away would. Pass it as
    `Monitor(..., export=[MemoryExporter()])`."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.context: Any = None
        self.points: list[tuple[str, int, float, Any]] = []
        self.findings: list[Any] = []
        self.closed = False

    def open(self, context: Any) -> None:
        self.context = context

    def write(self, points: Any, findings: Any) -> None:
        if self.fail:
            raise ConnectionError("the tracking server went away")
        self.points += points
        self.findings += findings

    def close(self) -> None:
        self.closed = True


# -- NVML (issue 30) ---------------------------------------------------------------------------------
@dataclass
class FakeGpu:
    """One GPU as NVML reports it, in NVML's own units (percent, °C, mW, MHz, counts, reason bits)."""

    util: float = 92.0
    mem_util: float = 45.0
    temp: float = 64.0
    power_mw: float = 550_000.0
    limit_mw: float = 700_000.0
    sm_mhz: float = 1980.0
    mem_mhz: float = 2619.0
    reasons: int = 0  # nvmlClocksEventReason* bits: 0x20|0x40 thermal, 0x04|0x80 power, 0x08 HW slowdown
    ecc_corrected: int = 0
    ecc_uncorrected: int = 0
    remap_pending: bool = False
    pcie_replays: int = 0
    uuid: str = ""


class NVMLError_Timeout(Exception):  # noqa: N801 - pynvml's own name for "no event before the timeout"
    pass


class NVMLError_NotSupported(Exception):  # noqa: N801
    pass


class FakeNvml:
    """Stands in for the `pynvml` module (nvidia-ml-py) at the library boundary.

    Change a GPU's fields while the run trains (`nvml.gpus[0].reasons = 0x40` at step N) and the
    sampler sees it at its next sample; `xid(device, code)` delivers an XID event. `unsupported`
    names functions that raise NOT_SUPPORTED (ECC on a consumer board). `threads` counts the calls
    by the name of the thread that made them; `no_gpu=True` fails `nvmlInit` as a machine without
    a driver does.
    """

    NVML_TEMPERATURE_GPU, NVML_CLOCK_SM, NVML_CLOCK_MEM = 0, 1, 2

    def __init__(self, gpus: Sequence[FakeGpu] | None = None, unsupported: Sequence[str] = (),
                 no_gpu: bool = False) -> None:
        self.gpus = list(gpus) if gpus is not None else [FakeGpu()]
        for i, g in enumerate(self.gpus):
            g.uuid = g.uuid or f"GPU-fake-{i:04d}"
        self.unsupported = set(unsupported)
        self.no_gpu = no_gpu
        self.threads: Counter[str] = Counter()
        self._events: list[tuple[int, int]] = []
        self._event_ready = threading.Event()

    def xid(self, device: int, code: int) -> None:
        self._events.append((device, code))
        self._event_ready.set()

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("nvml"):
            raise AttributeError(name)
        impl = getattr(type(self), "_" + name, None)
        if impl is None:
            raise AttributeError(f"FakeNvml has no {name}")

        def call(*args: Any) -> Any:
            self.threads[threading.current_thread().name] += 1
            if name in self.unsupported:
                raise NVMLError_NotSupported(f"{name}: Not Supported")
            return impl(self, *args)

        return call

    def _gpu(self, handle: Any) -> FakeGpu:
        return self.gpus[int(handle)]

    def _nvmlInit(self) -> None:
        if self.no_gpu:
            raise RuntimeError("NVML Shared Library Not Found")

    def _nvmlShutdown(self) -> None:
        pass

    def _nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def _nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        if not 0 <= i < len(self.gpus):
            raise ValueError(f"Invalid Argument: no GPU {i}")
        return i

    def _nvmlDeviceGetHandleByUUID(self, uuid: str) -> int:
        return next(i for i, g in enumerate(self.gpus) if g.uuid == uuid)

    def _nvmlDeviceGetUtilizationRates(self, h: Any) -> Any:
        g = self._gpu(h)
        return type("c_nvmlUtilization_t", (), {"gpu": int(g.util), "memory": int(g.mem_util)})()

    def _nvmlDeviceGetTemperature(self, h: Any, sensor: int) -> int:
        return int(self._gpu(h).temp)

    def _nvmlDeviceGetPowerUsage(self, h: Any) -> int:
        return int(self._gpu(h).power_mw)

    def _nvmlDeviceGetEnforcedPowerLimit(self, h: Any) -> int:
        return int(self._gpu(h).limit_mw)

    def _nvmlDeviceGetClockInfo(self, h: Any, kind: int) -> int:
        g = self._gpu(h)
        return int(g.sm_mhz if kind == 1 else g.mem_mhz)

    def _nvmlDeviceGetCurrentClocksEventReasons(self, h: Any) -> int:
        return self._gpu(h).reasons

    def _nvmlDeviceGetTotalEccErrors(self, h: Any, error_type: int, counter: int) -> int:
        g = self._gpu(h)
        return g.ecc_uncorrected if error_type == 1 else g.ecc_corrected

    def _nvmlDeviceGetRemappedRows(self, h: Any) -> tuple[int, int, int, int]:
        g = self._gpu(h)
        return (0, g.ecc_uncorrected, int(g.remap_pending), 0)

    def _nvmlDeviceGetRetiredPagesPendingStatus(self, h: Any) -> int:
        return int(self._gpu(h).remap_pending)

    def _nvmlDeviceGetPcieReplayCounter(self, h: Any) -> int:
        return self._gpu(h).pcie_replays

    def _nvmlEventSetCreate(self) -> str:
        return "event-set"

    def _nvmlDeviceRegisterEvents(self, h: Any, mask: int, events: Any) -> None:
        pass

    def _nvmlEventSetFree(self, events: Any) -> None:
        pass

    def _nvmlEventSetWait_v2(self, events: Any, timeout_ms: int) -> Any:
        if not self._events and not self._event_ready.wait(timeout_ms / 1000):
            raise NVMLError_Timeout("Timeout")
        self._event_ready.clear()
        if not self._events:
            raise NVMLError_Timeout("Timeout")
        device, code = self._events.pop(0)
        return type("c_nvmlEventData_t", (), {"device": device, "eventData": code, "eventType": 8})()
