"""Cross-rank health: stragglers, step desync and memory divergence, from the per-rank health vectors
the ranks all-gather every N steps. Pure: the gather itself lives in probe/health.py.

A straggler score is the fastest rank's median / this rank's median (NVIDIA's resiliency extension),
on compute time (forward passes: a collective in the step equalizes whole step times), on the time outside the
backward pass (a rank late to DDP's gradient all-reduce, by work after `optimizer.step()` or a slow data fetch,
makes the others wait inside their backward: only this share tells it apart) and on step time;
a rank below the threshold for `reports` reports in a row is named, with the evidence; once it is back
above, the same finding is reported resolved. A compute-time gap under `_MATERIAL` of the rank's step time
is not a straggler signal, whatever its ratio: 0.2 ms of forward against 0.4 ms in a 24 ms step is timer
noise on shared cores and costs the run nothing (the slow part of a rank behind a collective, its wait,
is not in the vector).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from stethoscope.findings.catalogue import FINDING_TYPES, RANK_DIVERGENCE, STRAGGLER
from stethoscope.records import Finding

_THROTTLE = "gpu_throttle"  # a field of the health vector (and an evidence key), not the finding type

FIELDS = ("rank", "step", "step_s", "compute_s", "data_s", "mem_gib", "finding", "gc_s", "n", _THROTTLE, "gpu_temp_c",
          "own_s")
"""The health vector of one rank, in order (floats; `finding` is an index into FINDING_TYPES + 1, 0: none,
which is why that order is append-only; `gpu_throttle` the rank's GPU at its last NVML sample: 0 free,
1 power cap, 2 thermal or hardware slowdown; `own_s` the median step time less the backward pass, from the
last forward's end to the optimizer step, 0 when no torch optimizer stepped)."""
THROTTLE_NAMES = {1: "held at its power cap", 2: "thermally throttled (or in a hardware slowdown)"}
SIGNALS = (("compute_s", "compute (forward) time"),
           ("own_s", "time outside the backward pass (where the others wait for it in the gradient all-reduce)"),
           ("step_s", "step time"))
_MATERIAL = 0.05  # a compute-time gap under this share of the rank's step time is noise-sized


def finding_code(finding_type: str | None) -> float:
    return float(FINDING_TYPES.index(finding_type) + 1) if finding_type in FINDING_TYPES else 0.0


def finding_name(code: float) -> str | None:
    i = int(code) - 1
    return FINDING_TYPES[i] if 0 <= i < len(FINDING_TYPES) else None


class RankHealth:
    """`update(rows, step)`: rows are the gathered vectors (dicts keyed by FIELDS); returns findings."""

    def __init__(self, threshold: float = 0.8, reports: int = 2, memory_ratio: float = 1.3,
                 memory_min_gib: float = 0.5) -> None:
        self.threshold, self.reports = threshold, reports
        self.memory_ratio, self.memory_min_gib = memory_ratio, memory_min_gib
        self.slow_runs: dict[int, int] = {}
        self.open: dict[str, Finding] = {}
        self.last: list[dict[str, float]] = []
        self.scores: dict[int, dict[str, float]] = {}

    def update(self, rows: Sequence[dict[str, float]], step: int) -> list[Finding]:
        self.last = list(rows)
        out: list[Finding] = []
        out += self._desync(rows, step)
        out += self._stragglers(rows, step)
        out += self._memory(rows, step)
        return out

    # -- stragglers -----------------------------------------------------------------------------
    def _stragglers(self, rows: Sequence[dict[str, float]], step: int) -> list[Finding]:
        worst: dict[int, tuple[float, str, float, float, int]] = {}  # rank -> (score, signal, median, fastest, who)
        self.scores = {}
        for key, label in SIGNALS:
            vals = {int(r["rank"]): r[key] for r in rows if r.get("n", 0) > 0 and r.get(key, 0) > 0}
            if len(vals) < 2:
                continue
            fastest_rank = min(vals, key=vals.get)
            fastest = vals[fastest_rank]
            steps = {int(r["rank"]): r.get("step_s", 0.0) for r in rows}
            for rank, v in vals.items():
                if key != "step_s" and steps.get(rank, 0.0) > 0 and v - fastest < _MATERIAL * steps[rank]:
                    v = fastest  # the gap is a sliver of the step: no evidence of a slow rank
                score = fastest / v
                self.scores.setdefault(rank, {})[key] = round(score, 4)
                if rank not in worst or score < worst[rank][0]:
                    worst[rank] = (score, label, v, fastest, fastest_rank)
        out: list[Finding] = []
        for rank, (score, label, median, fastest, fastest_rank) in sorted(worst.items()):
            key = f"straggler:{rank}"
            if score < self.threshold:
                self.slow_runs[rank] = self.slow_runs.get(rank, 0) + 1
                if self.slow_runs[rank] >= self.reports and key not in self.open:
                    out.append(self._straggler(rows, rank, score, label, median, fastest, fastest_rank, step))
            else:
                self.slow_runs[rank] = 0
                if key in self.open:
                    out.append(self._resolved(key, step, f"rank {rank} is no longer a straggler (score "
                                                         f"{score:.2f} at step {step})"))
        return out

    def _straggler(self, rows: Sequence[dict[str, float]], rank: int, score: float, label: str, median: float,
                   fastest: float, fastest_rank: int, step: int) -> Finding:
        me = next(r for r in rows if int(r["rank"]) == rank)
        causes = _slow_causes(rows, me)
        message = (f"rank {rank} is a straggler: its median {label} is {median * 1e3:.1f} ms against "
                   f"{fastest * 1e3:.1f} ms on rank {fastest_rank}, the fastest (score {score:.2f} < "
                   f"{self.threshold:.2f}) for {self.slow_runs[rank]} health reports in a row")
        evidence: dict[str, Any] = {"rank": rank, "score": round(score, 4), "signal": label, "median_s": median,
                                    _THROTTLE: int(me.get(_THROTTLE, 0.0)),
                                    "fastest_s": fastest, "fastest_rank": fastest_rank,
                                    "reports": self.slow_runs[rank], "threshold": self.threshold,
                                    "scores": {str(k): v for k, v in sorted(self.scores.items())}}
        f = Finding(STRAGGLER, "warning", step, message, evidence=evidence, causes=causes, source="health")
        self.open[f"straggler:{rank}"] = f
        return f

    # -- desync and memory ----------------------------------------------------------------------
    def _desync(self, rows: Sequence[dict[str, float]], step: int) -> list[Finding]:
        steps = {int(r["rank"]): int(r["step"]) for r in rows}
        key = "desync"
        if len(set(steps.values())) > 1:
            if key in self.open:
                return []
            common = statistics.median_low(sorted(steps.values()))
            odd = sorted(r for r, s in steps.items() if s != common)
            gc = {int(r["rank"]): r.get("gc_s", 0.0) for r in rows}
            causes = []
            if odd and max(gc[r] for r in odd) > 2 * (statistics.median(gc.values()) + 1e-3):
                causes.append("unsynchronized garbage collection: the ranks out of step spent more time in GC")
            message = (f"ranks out of step: rank{'s' if len(odd) > 1 else ''} {', '.join(map(str, odd))} at step "
                       f"{', '.join(str(steps[r]) for r in odd)} while the others are at step {common}")
            f = Finding(RANK_DIVERGENCE, "error", step, message, source="health", causes=causes,
                        evidence={"kind": "step_desync", "ranks": odd, "steps": {str(k): v for k, v in steps.items()}})
            self.open[key] = f
            return [f]
        if key in self.open:
            return [self._resolved(key, step, f"ranks back in step at step {step}")]
        return []

    def _memory(self, rows: Sequence[dict[str, float]], step: int) -> list[Finding]:
        mem = {int(r["rank"]): r["mem_gib"] for r in rows if r.get("mem_gib", 0) > 0}
        if len(mem) < 2:
            return []
        med = statistics.median(mem.values())
        out = []
        for rank, m in sorted(mem.items()):
            key = f"memory:{rank}"
            high = m > self.memory_ratio * med and m - med > self.memory_min_gib
            if high and key not in self.open:
                message = (f"rank {rank} uses {m:.2f} GiB against a median of {med:.2f} GiB over the ranks "
                           f"(x{m / med:.2f}): memory differs across ranks, a blind spot when only rank 0 is watched")
                f = Finding(RANK_DIVERGENCE, "warning", step, message, source="health",
                            evidence={"kind": "memory", "rank": rank, "mem_gib": m, "median_gib": med,
                                      "per_rank_gib": {str(k): v for k, v in sorted(mem.items())}})
                self.open[key] = f
                out.append(f)
            elif not high and key in self.open:
                out.append(self._resolved(key, step, f"rank {rank}'s memory is back near the others'"))
        return out

    def _resolved(self, key: str, step: int, message: str) -> Finding:
        f = self.open.pop(key)
        return Finding(f.type, f.severity, f.step, message, end_step=step, source=f.source,
                       evidence=dict(f.evidence, recovered=True))


def _slow_causes(rows: Sequence[dict[str, float]], me: dict[str, float]) -> list[str]:
    others = [r for r in rows if r is not me]
    causes = []
    gc_med = statistics.median(r.get("gc_s", 0.0) for r in others)
    if me.get("gc_s", 0.0) > 2 * gc_med + 0.01 * max(1.0, me.get("n", 1.0)) * me.get("step_s", 0.0):
        causes.append(f"garbage collection: {me['gc_s']:.2f} s in GC over the window against {gc_med:.2f} s on "
                      "the other ranks (unsynchronized GC; stethoscope.probe.SyncedGC collects at the same step)")
    throttle = int(me.get(_THROTTLE, 0.0))
    if throttle and throttle > max(int(r.get(_THROTTLE, 0.0)) for r in others):
        temp = me.get("gpu_temp_c", 0.0)
        causes.insert(0, f"its GPU is {THROTTLE_NAMES.get(throttle, 'throttled')}"
                         + (f" at {temp:.0f} °C" if temp else "") + " while the other ranks' are not (NVML)")
    data_med = statistics.median(r.get("data_s", 0.0) for r in others)
    if me.get("data_s", 0.0) > 2 * data_med + 0.005:
        causes.append(f"data loading: median wait {me['data_s'] * 1e3:.1f} ms against {data_med * 1e3:.1f} ms")
    return causes
