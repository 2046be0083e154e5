"""GPU health from NVML: utilization, temperature, power, clocks, throttling, ECC, XID, PCIe replays.

Sampled on a thread of its own (`GpuHealth`), never on the training thread, about once a second.
The boundary is the `pynvml` module of `nvidia-ml-py` (the `gpu` extra), imported lazily; in tests
`stethoscope.testing.FakeNvml` stands in for it and everything above it runs for real. No NVML, no
GPU, or a driver that refuses a query: that value is not recorded, and nothing is raised.

Devices are the ones visible to this rank (`CUDA_VISIBLE_DEVICES`, by index or UUID). The first is
recorded under the plain names (`gpu/temp_c`), every device also as `gpu/temp_c/gpu<i>` with `i` the
rank's own CUDA index, as the CUDA memory series are.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from stethoscope import records as R

log = logging.getLogger(__name__)

# NVML's clock-event (throttle) reason bits, as nvml.h defines them.
_THERMAL = 0x20 | 0x40  # SW thermal slowdown, HW thermal slowdown
_POWER = 0x04 | 0x80  # SW power cap, HW power brake
_HW_SLOWDOWN = 0x08
_XID_EVENT = 0x0000000000000008  # nvmlEventTypeXidCriticalError


def open_nvml(nvml: Any = None) -> Any:
    """The initialised NVML module (`pynvml`, or the fake given), or None when NVML is not at hand."""
    try:
        if nvml is None:
            import pynvml as nvml  # type: ignore[no-redef]
        nvml.nvmlInit()
        if nvml.nvmlDeviceGetCount() < 1:
            nvml.nvmlShutdown()
            return None
        return nvml
    except Exception as exc:  # noqa: BLE001 - no package, no driver, no GPU: nothing to sample
        log.debug("NVML not available: %s", exc)
        return None


def visible_devices(nvml: Any, env: str | None = None) -> list[tuple[int, Any]]:
    """(this rank's CUDA index, NVML handle) for each device CUDA_VISIBLE_DEVICES lets it see."""
    spec = os.environ.get("CUDA_VISIBLE_DEVICES") if env is None else env
    if spec is None or not spec.strip():
        return [(i, nvml.nvmlDeviceGetHandleByIndex(i)) for i in range(nvml.nvmlDeviceGetCount())]
    out = []
    for i, item in enumerate(x.strip() for x in spec.split(",")):
        try:
            handle = (nvml.nvmlDeviceGetHandleByIndex(int(item)) if item.isdigit()
                      else nvml.nvmlDeviceGetHandleByUUID(item))
        except Exception:  # noqa: BLE001 - "-1" or a MIG name: CUDA stops at the first bad entry too
            break
        out.append((i, handle))
    return out


class GpuSampler:
    """Reads every health counter of the visible devices; `sample()` gives metric name -> value."""

    def __init__(self, nvml: Any, devices: list[tuple[int, Any]]) -> None:
        self.nvml = nvml
        self.devices = devices
        self._broken: set[tuple[int, str]] = set()  # (device, query) the driver refused: not asked again
        self._events = self._xid_events()
        self.xids: list[tuple[int, int]] = []  # (device, xid) seen since the last sample

    def sample(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for pos, (dev, handle) in enumerate(self.devices):
            values = self._device(dev, handle)
            xids = [x for d, x in self.xids if d == dev]
            if xids:
                values[R.GPU_XID] = float(xids[-1])
            for name, v in values.items():
                out[f"{name}/gpu{dev}"] = v
                if pos == 0:
                    out[name] = v
        self.xids.clear()
        return out

    def wait(self, seconds: float, stop: threading.Event) -> None:
        """Sleep `seconds` (or until stopped), collecting XID events when the driver reports them."""
        if self._events is None:
            stop.wait(seconds)
            return
        deadline = time.monotonic() + seconds
        while not stop.is_set() and (left := deadline - time.monotonic()) > 0:
            try:
                data = self.nvml.nvmlEventSetWait_v2(self._events, int(min(left, 0.25) * 1000))
            except Exception as exc:  # noqa: BLE001 - NVML_ERROR_TIMEOUT: no event in this slice
                if "imeout" not in f"{type(exc).__name__} {exc}":
                    self._events = None
                    stop.wait(max(0.0, left))
                    return
                continue
            dev = next((d for d, h in self.devices if h == data.device), self.devices[0][0])
            self.xids.append((dev, int(data.eventData)))

    def close(self) -> None:
        try:
            if self._events is not None:
                self.nvml.nvmlEventSetFree(self._events)
            self.nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - shutting down a library that is going away
            pass

    # -- one device --------------------------------------------------------------------------------
    def _device(self, dev: int, h: Any) -> dict[str, float]:
        n = self.nvml
        v: dict[str, float] = {}
        util = self._ask(dev, "util", n.nvmlDeviceGetUtilizationRates, h)
        if util is not None:
            v[R.GPU_UTIL] = util.gpu / 100.0
            v[R.GPU_MEM_UTIL] = util.memory / 100.0
        self._put(v, R.GPU_TEMP, self._ask(dev, "temp", n.nvmlDeviceGetTemperature, h, 0))  # NVML_TEMPERATURE_GPU
        self._put(v, R.GPU_POWER, self._ask(dev, "power", n.nvmlDeviceGetPowerUsage, h), 1e-3)  # mW -> W
        self._put(v, R.GPU_POWER_LIMIT, self._ask(dev, "limit", n.nvmlDeviceGetEnforcedPowerLimit, h), 1e-3)
        self._put(v, R.GPU_SM_CLOCK, self._ask(dev, "sm", n.nvmlDeviceGetClockInfo, h, 1), 1e6)  # MHz -> Hz
        self._put(v, R.GPU_MEM_CLOCK, self._ask(dev, "mem", n.nvmlDeviceGetClockInfo, h, 2), 1e6)
        reasons = self._ask(dev, "reasons", self._reasons, h)
        if reasons is not None:
            v[R.GPU_THROTTLE_THERMAL] = float(bool(reasons & _THERMAL))
            v[R.GPU_THROTTLE_POWER] = float(bool(reasons & _POWER))
            v[R.GPU_THROTTLE_HW] = float(bool(reasons & _HW_SLOWDOWN))
        # volatile (since the driver loaded) ECC counts: memory error type 0/1, counter type 0 = volatile
        self._put(v, R.GPU_ECC_CORRECTED, self._ask(dev, "ecc0", n.nvmlDeviceGetTotalEccErrors, h, 0, 0))
        self._put(v, R.GPU_ECC_UNCORRECTED, self._ask(dev, "ecc1", n.nvmlDeviceGetTotalEccErrors, h, 1, 0))
        rows = self._ask(dev, "rows", n.nvmlDeviceGetRemappedRows, h)  # (corrected, uncorrected, pending, failed)
        if rows is not None:
            v[R.GPU_ROWS_PENDING] = float(bool(rows[2]))
        else:
            self._put(v, R.GPU_ROWS_PENDING, self._ask(dev, "retired", n.nvmlDeviceGetRetiredPagesPendingStatus, h))
        self._put(v, R.GPU_PCIE_REPLAYS, self._ask(dev, "pcie", n.nvmlDeviceGetPcieReplayCounter, h))
        return v

    def _reasons(self, h: Any) -> int:
        n = self.nvml
        get = getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None) or n.nvmlDeviceGetCurrentClocksThrottleReasons
        return int(get(h))

    def _ask(self, dev: int, key: str, fn: Callable[..., Any], *args: Any) -> Any:
        if (dev, key) in self._broken:
            return None
        try:
            return fn(*args)
        except Exception:  # noqa: BLE001 - NOT_SUPPORTED on this board (ECC on a consumer GPU, …)
            self._broken.add((dev, key))
            return None

    @staticmethod
    def _put(v: dict[str, float], name: str, value: Any, scale: float = 1.0) -> None:
        if value is not None:
            v[name] = float(value) * scale

    def _xid_events(self) -> Any:
        n = self.nvml
        try:
            events = n.nvmlEventSetCreate()
            for _, h in self.devices:
                n.nvmlDeviceRegisterEvents(h, _XID_EVENT, events)
            return events
        except Exception:  # noqa: BLE001 - events need a supported board and driver; sampling goes on
            return None


class GpuHealth:
    """A daemon thread that opens NVML, samples it every `interval` seconds into the run at the current
    step, and shuts it down: no NVML call is made on the training thread, not even to set up."""

    def __init__(self, option: Any, put: Callable[[dict[str, float], int, float], None],
                 current_step: Callable[[], int | None], interval: float = 1.0) -> None:
        self.sampler: GpuSampler | None = None
        self.last: dict[str, float] = {}
        """The newest sample (metric name -> value), for the cross-rank health vector."""
        self.samples = 0
        self.errors = 0
        self._option = option
        self._put, self._step, self._interval = put, current_step, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stethoscope-gpu", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            nvml = open_nvml(None if self._option is True else self._option)
            devices = visible_devices(nvml) if nvml is not None else []
            if not devices:
                return
            self.sampler = GpuSampler(nvml, devices)
        except Exception as exc:  # noqa: BLE001 - a driver that misbehaves: no GPU health, the run goes on
            log.warning("stethoscope: NVML could not be opened: %s", exc)
            return
        while not self._stop.is_set():
            self.sample_once()
            self.sampler.wait(self._interval, self._stop)
        self.sample_once()  # the state at the end of the run
        self.sampler.close()

    def sample_once(self) -> None:
        try:
            values = self.sampler.sample() if self.sampler is not None else None
            if values:
                self.last = values
                self._put(values, self._step() or 0, time.time())
                self.samples += 1
        except Exception as exc:  # noqa: BLE001 - never into the run: counted, logged once
            self.errors += 1
            if self.errors == 1:
                log.warning("stethoscope: sampling GPU health failed: %s (further failures only counted)", exc)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)


def start_gpu_health(option: Any, put: Callable[[dict[str, float], int, float], None],
                     current_step: Callable[[], int | None], interval: float) -> GpuHealth | None:
    """`option`: True (real NVML when installed), False (off), or an NVML stand-in (tests)."""
    if option is False:
        return None
    if option is True and importlib.util.find_spec("pynvml") is None:
        return None  # the `gpu` extra is not installed: no thread at all
    return GpuHealth(option, put, current_step, interval)
