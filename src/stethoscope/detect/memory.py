"""Memory: growth across steps that never falls back (a leak) and memory near the device limit.

Watches the CUDA allocated memory (else reserved, else peak, else host RSS). A leak grows by at
least `leak_min_rel` (and 0.25 GiB) over `leak_min_steps` steps and `leak_min_records` records with
almost every step-to-step change >= 0 and no one rise making half of it: allocator
warm-up in the first steps, sawtooth patterns (allocate, free) and a peak that stepped up once or twice
(a high-water mark only grows) do not qualify. Near the limit: the largest of allocated/reserved/peak above
`memory_near_limit` of `memory/cuda_total_gib` (the next bigger batch or a fragmentation spike OOMs).
"""

from __future__ import annotations

import math
from typing import Any

from stethoscope.detect.config import DetectConfig
from stethoscope.detect.stats import StepSeries, theil_sen_slope
from stethoscope.findings.catalogue import MEMORY_LEAK, MEMORY_PRESSURE
from stethoscope.records import CUDA_ALLOCATED, CUDA_PEAK, CUDA_RESERVED, CUDA_TOTAL, RSS, Finding, StepRecord

SERIES = (CUDA_ALLOCATED, CUDA_RESERVED, CUDA_PEAK, RSS)
_WINDOW = 64
_CHECK_EVERY = 8
_MIN_GROWTH_GIB = 0.25
_MONOTONE = 0.9
_STEADY = 0.5  # no single step-to-step rise may make this share of the growth seen


class MemoryDetector:
    """Memory leaks (steady growth) and memory pressure (near the device total)."""

    name = "memory"

    def __init__(self, config: DetectConfig | None = None) -> None:
        self.config = config or DetectConfig()
        self.history = StepSeries(_WINDOW)
        self._s: dict[str, Any] = {"series": None, "n": 0, "leak": None, "pressure": None, "first": None}

    def update(self, record: StepRecord) -> list[Finding]:
        values = record.values
        out: list[Finding] = []
        self._pressure(record.step, values, out)
        v = self._value(values)
        if v is None:
            return out
        s = self._s
        if s["first"] is None:
            s["first"] = [record.step, v]
        self.history.push(record.step, v)
        s["n"] += 1
        if s["leak"] is not None:
            s["leak"].update(last_step=record.step, last=v)
        elif s["n"] % _CHECK_EVERY == 0:
            out.extend(self._leak_check())
        return out

    def finish(self) -> list[Finding]:
        out = []
        s = self._s
        if s["leak"] is not None:
            f = self._leak_finding(s["leak"])
            f.end_step = s["leak"]["last_step"]
            out.append(f)
        if s["pressure"] is not None:
            f = self._pressure_finding(s["pressure"])
            f.end_step = s["pressure"]["last_step"]
            out.append(f)
        return out

    def _value(self, values: dict[str, float]) -> float | None:
        s = self._s
        if s["series"] is None:
            s["series"] = next((n for n in SERIES if n in values), None)
        v = values.get(s["series"]) if s["series"] else None
        return v if v is not None and math.isfinite(v) else None

    # -- leak -------------------------------------------------------------------------------------
    def _leak_check(self) -> list[Finding]:
        cfg = self.config
        items = self.history.items()
        if len(items) < cfg.leak_min_records or items[-1][0] - items[0][0] < cfg.leak_min_steps:
            return []
        vals = [v for _, v in items]
        growth = vals[-1] - vals[0]
        if growth < max(_MIN_GROWTH_GIB, cfg.leak_min_rel * abs(vals[0])):
            return []
        ups = sum(1 for a, b in zip(vals, vals[1:]) if b >= a - 1e-9)
        if ups < _MONOTONE * (len(vals) - 1):
            return []
        if max(b - a for a, b in zip(vals, vals[1:])) >= _STEADY * growth:
            return []  # one jump made most of it (a peak's high-water mark stepping up): no steady leak
        slope = theil_sen_slope([float(s) for s, _ in items], vals)
        leak = {"start": items[0][0], "first": vals[0], "last": vals[-1], "last_step": items[-1][0],
                "slope": slope, "series": self._s["series"]}
        self._s["leak"] = leak
        return [self._leak_finding(leak)]

    def _leak_finding(self, leak: dict[str, Any]) -> Finding:
        per_k = leak["slope"] * 1000
        msg = (f"{leak['series']} keeps growing: {leak['first']:.3g} -> {leak['last']:.3g} GiB from step "
               f"{leak['start']} ({per_k:+.3g} GiB per 1000 steps): a memory leak (tensors kept across steps?)")
        ev = {"series": leak["series"], "first_gib": leak["first"], "last_gib": leak["last"],
              "gib_per_1000_steps": per_k}
        return Finding(MEMORY_LEAK, "warning", leak["start"], msg, evidence=ev, source=self.name)

    # -- pressure ---------------------------------------------------------------------------------
    def _pressure(self, step: int, values: dict[str, float], out: list[Finding]) -> None:
        total = values.get(CUDA_TOTAL)
        if total is None or not math.isfinite(total) or total <= 0:
            return
        used = -math.inf
        for name in (CUDA_PEAK, CUDA_RESERVED, CUDA_ALLOCATED):
            x = values.get(name)
            if x is not None and x > used:  # NaN compares False: skipped
                used = x
        if not math.isfinite(used):
            return
        frac = used / total
        p = self._s["pressure"]
        if p is None:
            if frac >= self.config.memory_near_limit:
                p = self._s["pressure"] = {"start": step, "last_step": step, "peak": frac, "total": total}
                out.append(self._pressure_finding(p))
            return
        if frac >= self.config.memory_near_limit - 0.05:
            p["last_step"] = step
            p["peak"] = max(p["peak"], frac)
            return
        self._s["pressure"] = None
        f = self._pressure_finding(p)
        f.end_step = p["last_step"]
        out.append(f)

    def _pressure_finding(self, p: dict[str, Any]) -> Finding:
        msg = (f"GPU memory at {p['peak']:.0%} of {p['total']:.3g} GiB from step {p['start']}: one bigger batch "
               "or a fragmentation spike away from an out-of-memory error")
        ev = {"fraction": p["peak"], "total_gib": p["total"]}
        return Finding(MEMORY_PRESSURE, "warning", p["start"], msg, evidence=ev, source=self.name)

    def state_dict(self) -> dict[str, Any]:
        return {"history": self.history.state_dict(), "s": self._s}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.history.load_state_dict(state["history"])
        self._s = state["s"]
