"""GPU health from NVML series (`gpu/*`, see capture/gpu.py): hardware faults, throttling, idle SMs.

* An uncorrectable ECC error or an XID event is critical and names the device: the next kernel on it
  may crash the rank or, worse, compute on corrupted memory.
* Clocks held down by a thermal limit or a hardware slowdown for `throttle_min_samples` samples is an
  episode (`gpu_throttle`); the throughput drop it causes is linked to it (`findings.links`). A power
  cap alone is the ordinary state of a busy GPU at its power limit: info.
* SM utilization below `underused_util` for a window while steps run: the GPU waits on something; the
  data-wait share of the step time says whether it is the input pipeline or the host (Python, launches).
"""

from __future__ import annotations

import re
from typing import Any

from stethoscope.detect.config import DetectConfig
from stethoscope.findings.catalogue import GPU_ECC_ERROR, GPU_THROTTLE, GPU_UNDERUSED
from stethoscope.findings.catalogue import GPU_XID as GPU_XID_FINDING  # records.GPU_XID: the metric
from stethoscope.records import (DATA_WAIT, GPU_ECC_UNCORRECTED, GPU_SERIES, GPU_SM_CLOCK, GPU_TEMP, GPU_THROTTLE_HW,
                                 GPU_THROTTLE_POWER, GPU_THROTTLE_THERMAL, GPU_UTIL, GPU_XID, STEP_TIME, Finding,
                                 StepRecord)

THROTTLE_MIN_SAMPLES = 3  # consecutive samples (about a second each) before a throttle is an episode
THROTTLE_WARN_SAMPLES = 30  # a thermal/HW slowdown that holds this long costs the run: warning
UNDERUSED_UTIL = 0.5
UNDERUSED_WINDOW = 60
INPUT_BOUND_SHARE = 0.2
_DEVICE = re.compile(r"/gpu(\d+)$")
_PLAIN = frozenset(GPU_SERIES)
# XIDs that mean the hardware (memory, bus, NVLink, GSP), not the program: drain the node.
HARDWARE_XIDS = frozenset({48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 121, 140})
APP_XIDS = {13: "graphics engine exception (often an illegal memory access or a kernel assert)",
            31: "GPU memory page fault (an illegal address in a kernel)", 43: "the GPU stopped a faulting kernel",
            45: "a context was torn down (often after another fault)"}


class GpuHealthDetector:
    """ECC errors and XIDs (critical), throttle episodes, and GPUs left idle by their input."""

    name = "gpu"

    def __init__(self, config: DetectConfig | None = None) -> None:
        self.config = config or DetectConfig()
        self._s: dict[str, Any] = {"ecc": {}, "xid": [], "throttle": {}, "util": [], "wait": [], "under": None,
                                   "seen": False}

    def update(self, record: StepRecord) -> list[Finding]:
        values = record.values
        if _PLAIN.isdisjoint(values):  # no NVML sample in this record (device 0 is always under the plain names)
            if self._s["seen"]:
                self._timing(values)
            return []
        self._s["seen"] = True
        out: list[Finding] = []
        for dev, vals in _per_device(values).items():
            out += self._ecc(record.step, dev, vals)
            out += self._xid(record.step, dev, vals)
            out += self._throttle(record.step, dev, vals)
        self._timing(values)
        out += self._underused(record.step, values)
        return out

    def finish(self) -> list[Finding]:
        out = []
        for dev, ep in self._s["throttle"].items():
            if ep is not None and ep["n"] >= THROTTLE_MIN_SAMPLES:
                out.append(self._throttle_finding(dev, ep, ended=False))
        return out

    # -- hardware faults ----------------------------------------------------------------------------
    def _ecc(self, step: int, dev: str, vals: dict[str, float]) -> list[Finding]:
        n = vals.get(GPU_ECC_UNCORRECTED)
        seen = self._s["ecc"]
        if n is None or n <= seen.get(dev, 0):
            return []
        first = dev not in seen
        seen[dev] = n
        when = "before this run started (the count is since the driver loaded)" if first else f"at step {step}"
        msg = (f"GPU {dev}: {n:.0f} uncorrectable ECC memory error{'s' if n != 1 else ''} {when}; this rank's "
               "results may be corrupt and its next kernels may crash")
        return [Finding(GPU_ECC_ERROR, "critical", step, msg, source=self.name,
                        evidence={"device": dev, "uncorrected": n, "before_run": first},
                        causes=[f"a failing memory cell on GPU {dev} (uncorrectable ECC)"],
                        fixes=[f"drain this node: stop the run, resume from the last verified checkpoint on other "
                               f"GPUs, and have GPU {dev} checked (`nvidia-smi -q -d ECC`, a GPU reset or an RMA)"])]

    def _xid(self, step: int, dev: str, vals: dict[str, float]) -> list[Finding]:
        code = vals.get(GPU_XID)
        if code is None or (dev, code) in self._s["xid"]:
            return []
        self._s["xid"].append((dev, code))
        xid = int(code)
        what = APP_XIDS.get(xid) or ("a hardware fault" if xid in HARDWARE_XIDS else "a driver-reported GPU error")
        hardware = xid in HARDWARE_XIDS
        fix = (f"drain this node and have GPU {dev} checked (XID {xid} is a hardware error)" if hardware else
               "rerun the failing step with CUDA_LAUNCH_BLOCKING=1 to find the kernel; check the rank's traceback")
        return [Finding(GPU_XID_FINDING, "critical", step, f"GPU {dev}: XID {xid} at step {step}: {what}",
                        source=self.name, evidence={"device": dev, "xid": xid, "hardware": hardware},
                        causes=[f"XID {xid} on GPU {dev}: {what}"], fixes=[fix, "see `dmesg | grep -i xid` on the node"])]

    # -- throttling -----------------------------------------------------------------------------------
    def _throttle(self, step: int, dev: str, vals: dict[str, float]) -> list[Finding]:
        reason = ("thermal" if vals.get(GPU_THROTTLE_THERMAL) else "hardware slowdown" if vals.get(GPU_THROTTLE_HW)
                  else "power cap" if vals.get(GPU_THROTTLE_POWER) else None)
        eps = self._s["throttle"]
        ep = eps.get(dev)
        if reason is not None:
            if ep is None:
                ep = eps[dev] = {"start": step, "end": step, "n": 0, "reasons": [], "temp": None, "clock": None,
                                 "base_clock": self._s.get(f"clock{dev}")}
            ep["end"], ep["n"] = step, ep["n"] + 1
            if reason not in ep["reasons"]:
                ep["reasons"].append(reason)
            ep["temp"] = max(ep["temp"] or 0.0, vals.get(GPU_TEMP) or 0.0) or None
            ep["clock"] = min(ep["clock"] or 1e30, vals.get(GPU_SM_CLOCK) or 1e30)
            return []
        if GPU_SM_CLOCK in vals:
            self._s[f"clock{dev}"] = vals[GPU_SM_CLOCK]
        if ep is None:
            return []
        eps[dev] = None
        return [self._throttle_finding(dev, ep, ended=True)] if ep["n"] >= THROTTLE_MIN_SAMPLES else []

    def _throttle_finding(self, dev: str, ep: dict[str, Any], ended: bool) -> Finding:
        reasons = ep["reasons"]
        costly = any(r != "power cap" for r in reasons) and ep["n"] >= THROTTLE_WARN_SAMPLES
        temp = f", up to {ep['temp']:.0f} °C" if ep["temp"] else ""
        clock = ""
        if ep["clock"] and ep["clock"] < 1e29:
            base = ep["base_clock"]
            clock = f", SM clock down to {ep['clock'] / 1e6:.0f} MHz" + (f" from {base / 1e6:.0f}" if base else "")
        span = f"from step {ep['start']} to {ep['end']}" if ended else f"since step {ep['start']}"
        msg = f"GPU {dev} throttled ({' and '.join(reasons)}{temp}{clock}) {span}, {ep['n']} samples"
        fixes = (["check the node's cooling and airflow (`nvidia-smi -q -d TEMPERATURE,PERFORMANCE`)"]
                 if "thermal" in reasons else [])
        fixes += ["a power cap at full load is normal; a lower cap than the board's (`nvidia-smi -q -d POWER`) "
                  "is a setting to raise"] if "power cap" in reasons else []
        fixes += ["a hardware slowdown (HW_SLOWDOWN) points at power delivery or an overheating board: "
                  "have the node checked"] if "hardware slowdown" in reasons else []
        return Finding(GPU_THROTTLE, "warning" if costly else "info", ep["start"], msg,
                       end_step=ep["end"] if ended else None, source=self.name, fixes=fixes,
                       evidence={"device": dev, "reasons": list(reasons), "samples": ep["n"],
                                 "max_temp_c": ep["temp"], "min_sm_clock_hz": ep["clock"] if clock else None},
                       causes=[f"GPU {dev}'s clocks were held down by: {', '.join(reasons)}"])

    # -- an idle GPU ---------------------------------------------------------------------------------
    def _timing(self, values: dict[str, float]) -> None:
        step_s = values.get(STEP_TIME)
        if step_s is not None:
            w = self._s["wait"]
            w.append((values.get(DATA_WAIT) or 0.0, step_s))
            if len(w) > 2 * UNDERUSED_WINDOW:  # trimmed now and then, not on every record
                del w[:-UNDERUSED_WINDOW]

    def _underused(self, step: int, values: dict[str, float]) -> list[Finding]:
        util = values.get(GPU_UTIL)
        if util is None:
            return []
        u = self._s["util"]
        u.append(util)
        del u[:-UNDERUSED_WINDOW]
        if self._s["under"] is not None or len(u) < UNDERUSED_WINDOW or sorted(u)[len(u) // 2] >= UNDERUSED_UTIL:
            return []
        self._s["under"] = step
        med = sorted(u)[len(u) // 2]
        waits = self._s["wait"][-UNDERUSED_WINDOW:]
        step_s = sum(t for _, t in waits)
        share = sum(w for w, _ in waits) / step_s if step_s > 0 else None
        if share is not None and share >= INPUT_BOUND_SHARE:
            cause = (f"input-bound: {share:.0%} of each step waits for the next batch")
            fixes = ["more DataLoader workers, pin_memory=True, prefetching, or pre-tokenized data"]
        else:
            cause = "host-bound: the GPU waits on Python and kernel launches (small kernels, syncs, logging)"
            if share is not None:
                cause += f" (data wait is only {share:.0%} of the step)"
            fixes = ["a larger batch per GPU, torch.compile or CUDA graphs, fewer host syncs (.item()) per step"]
        return [Finding(GPU_UNDERUSED, "warning", step,
                        f"the GPU was busy only {med:.0%} of the time over the last {len(u)} samples: {cause}",
                        source=self.name, causes=[cause], fixes=fixes,
                        evidence={"median_util": med, "samples": len(u), "data_wait_share": share})]

    # -- state ---------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {k: (dict(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else v)
                for k, v in self._s.items()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._s.update(state)
        self._s["xid"] = [tuple(x) for x in self._s.get("xid", [])]


def _per_device(values: dict[str, float]) -> dict[str, dict[str, float]]:
    """{device: {plain gpu/ name: value}}; a log with only the plain names is device "0"."""
    out: dict[str, dict[str, float]] = {}
    for k, v in values.items():
        if not k.startswith("gpu/"):
            continue
        m = _DEVICE.search(k)
        if m:
            out.setdefault(m.group(1), {})[k[: m.start()]] = v
    if not out:
        out["0"] = {k: v for k, v in values.items() if k.startswith("gpu/")}
    return out
