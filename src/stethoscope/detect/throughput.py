"""Throughput: persistent slowdowns (a slow GPU, a regression) and periodic stalls (GC, eval, I/O).

Watches the step time, or the inverse of the first throughput series the run logs (tokens/s,
samples/s, TFLOP/s, MFU), or else a clock's seconds per step (`detect.throughput_clock`). A record is slow when it is `dip_min_rel` (dips) or `drop_min_rel`
(persistent) above the recent level and far outside the noise. `drop_records` slow records in a
row are a persistent `throughput_drop` (warning): BLOOM-176B's one slow GPU cost 5%. A slow
record followed by a normal one is a dip; dips are summed into ONE `periodic_stall` finding. Both are
graded by their cost to the run (`detect.throughput_findings`): info until they have lasted and cost the
run a share of its time and real seconds; a slowdown that recovered, or that other work on the machine
caused (the process's CPU share fell), stays info. The step that holds a hang the watchdog reported
(`HANG_SERIES` on the record before it) is the hang's, not a stall.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from stethoscope.detect.config import DetectConfig
from stethoscope.detect.level_shift import find_shift, may_shift, z_needed
from stethoscope.detect.slowdown import extend, hold, lost, median_last, open_drop, recent, release
from stethoscope.detect.stall_patterns import (
    STALLS_KEPT,
    add_stall,
    new_kind,
    new_start,
    new_stalls,
    stalls_in,
)
from stethoscope.detect.stats import Window, shrunk_sigma
from stethoscope.detect.step_time_alias import StepTimeAlias
from stethoscope.detect.throughput_causes import EVAL, eval_seconds, slow_causes, step_time_excess
from stethoscope.detect.throughput_clock import StepClock
from stethoscope.detect.throughput_onset import eval_stalls, fit_onset, startup, streak_evals
from stethoscope.detect.throughput_findings import (
    PERSISTENT_RECORDS,
    STARTUP_RECORDS,
    contention,
    drop_finding,
    drop_severity,
    eval_paid,
    median,
    quantile,
    stall_finding,
    stall_severity,
)
from stethoscope.detect.throughput_series import time_like
from stethoscope.records import (
    CPU_PCT,
    CUDA_ALLOCATED,
    CUDA_RESERVED,
    DATA_WAIT,
    GC_PAUSE,
    GPU_UTIL,
    STEP_TIME,
    Finding,
    StepRecord,
)

HANG_SERIES = "stethoscope/hang_s"  # the watchdog's point at the last step before a hang (probe.live)
_LEVEL_N = 16
_RAW_N = 512  # the run's own dispersion is judged over this many records
_STALL_IN_DROP = 3.0  # during a slowdown, a record this many times its slow level is a stall on top of it
_REFRESH = 8  # records between recomputations of the O(window) level and noise
_MIN_BASELINE = 2  # records before a step can be a dip (the first steps of a log: compile, warm-up)
_MIN_BASELINE_DROP = 3  # records before a slowdown can be persistent (a level shift needs a level)
_DOMINANT = 4.0  # a stall this many times bigger than all before starts a new pattern
_DEVICE_SERIES = (CUDA_ALLOCATED, CUDA_RESERVED, GPU_UTIL)
_CPU_KEPT = 32  # CPU-share samples kept from normal records (the level a slowdown's share is compared with)
_PRIOR_RATE, _PRIOR_RECORDS = 0.01, 10.0  # slow records expected before the run shows its own rate
_ALPHA = 0.01  # chance of a streak this long anywhere in the run, under the run's own slow-record rate
_MAX_STREAK = 20
_EXIT_RECORDS = 8  # in a noisy series, a slowdown ends when the median of this many records is back
_BLOCK_EVERY = 4  # records between two block tests of a noisy series (`detect.level_shift`)
_MAX_TRIAL = 64  # a streak is tested against the run's jitter until it is this long (longer streaks have
# steadier medians: a real level shift passes within a few dozen records)


class ThroughputDetector:
    """Step-time regressions and periodic dips."""

    name = "throughput"

    def __init__(self, config: DetectConfig | None = None) -> None:
        self.config = config or DetectConfig()
        self.window = Window(64)  # the baseline: records that were not slow
        self.raw = Window(_RAW_N)  # every record, slow ones too: the run's own dispersion
        self.raw_steps: deque[int] = deque(maxlen=_RAW_N)
        self._cache: list[float] | None = None
        self.alias = StepTimeAlias()  # a step time logged as `time`, `seconds`, `interval_runtime` ...
        self.clock = StepClock()  # else the time since the start (W&B's `_runtime`, TensorBoard's wall times)
        self._s: dict[str, Any] = {
            "series": None, "slow": [], "drop": None, "dips": None, "total": 0.0, "records": 0,
            "last_step": None,
        }

    def update(self, record: StepRecord) -> list[Finding]:
        s = self._s
        if "\neval/" in "\n" + "\n".join(record.values):  # a key starting eval/ (a join: a third of any()'s cost)
            s["eval_step"] = record.step  # this step's time or the next one's includes this eval
            s.pop("eval_slow", None)
            eval_seconds(s["drop"], record.values)
        if HANG_SERIES in record.values:
            s["hang_after"] = record.step  # the next step's time holds the hang: reported by the watchdog
        s["cpu"] = record.values.get(CPU_PCT)
        if s["cpu"] is not None and not s.get("device") and any(k in record.values for k in _DEVICE_SERIES):
            s["device"] = True  # a step that waits on a device: a falling CPU share says nothing of contention
        t = time_like(self._s, self.alias, self.clock, record.values, record.step)
        if t is None:
            return []
        hang = s.pop("hang_after", None)
        if hang is not None and record.step > hang:
            s["last_step"] = record.step
            return []  # the hang's own step: neither a stall, nor part of the level, nor of the run's cost
        if hang is not None:
            s["hang_after"] = hang
        if s["last_step"] is None or record.step - s["last_step"] > self.config.gap_reset_steps:
            s["since"], s["first_step"] = s["records"], record.step  # where this stretch's records begin
        if s["last_step"] is not None and record.step - s["last_step"] > self.config.gap_reset_steps:
            self.window.clear()  # an excerpt that skips ahead: the old level says nothing about the new one
            self.raw.clear()
            self.raw_steps.clear()
            self._cache = None
            s["slow"] = []
        s["total"] += t
        s["records"] += 1
        prev, s["last_step"] = s["last_step"], record.step
        s["why"] = self._why(record.values, prev)
        if GC_PAUSE in record.values or DATA_WAIT in record.values:
            s["causes_recorded"] = True  # the stall message then says none of them explains it, not to record them
        if s.get("eval_step") == record.step and len(self.window) >= _MIN_BASELINE:
            s["eval_slow"] = t >= self._stats(len(self.window))[0] * (1 + self.config.dip_min_rel)
        out = self._in_drop(record.step, t) if s["drop"] is not None else self._check(record.step, t)
        if s["drop"] is None and s["records"] % _BLOCK_EVERY == 0:
            out.extend(self._block_check(record.step, t))
        self.raw.push(t)
        self.raw_steps.append(record.step)
        return out

    def _why(self, values: dict[str, float], prev_step: int | None) -> list[str]:
        """What the record says the step spent its time on, beyond the model (`detect.throughput_causes`)."""
        if self._s["series"] != STEP_TIME or len(self.window) < _MIN_BASELINE:
            return slow_causes(self._s, values, prev_step, None)
        level, _ = self._stats(len(self.window))  # refreshes the level here, as `_check` would next
        excess = step_time_excess(values, level * (self._s.get("batch") or 1.0)) if (
            GC_PAUSE in values or DATA_WAIT in values) else None  # the excess is read only against these
        return slow_causes(self._s, values, prev_step, excess)

    def finish(self) -> list[Finding]:
        out: list[Finding] = []
        s = self._s
        if s["drop"] is not None:
            out.extend(self._stalls_on_top(s["drop"]))
            f = self._drop_finding(s["drop"])
            f.end_step = s["drop"]["last_step"]
            f.message = f.message.replace(" so far", "", 1) + "; still slow at the last record"
            out.append(f)
        if s["dips"] is not None and s["dips"]["count"] > 0:
            out.append(self._dip_finding(s["dips"]))
        return out

    # -- detection --------------------------------------------------------------------------------
    def _check(self, step: int, t: float) -> list[Finding]:
        s = self._s
        n = len(self.window)
        if n < _MIN_BASELINE:  # the first steps (compile, warm-up) make no baseline on their own
            self._push(t)
            return []
        cfg = self.config
        level, data_sigma = self._stats(n)
        persistent = dip = False
        if t >= level * (1 + cfg.drop_min_rel):
            persistent = t > level + cfg.drop_sigma * data_sigma
            sigma = shrunk_sigma(data_sigma, n, cfg.step_time_prior_rel_noise * level, cfg.prior_weight)
            dip = t >= level * (1 + cfg.dip_min_rel) and t > level + cfg.spike_sigma * sigma
        out: list[Finding] = []
        slow = s["slow"]
        if persistent or dip:
            s["exceed"] = s.get("exceed", 0) + 1
            slow.append([step, t, level, dip, s.get("why") or []])
            if n < _MIN_BASELINE_DROP:
                if len(slow) > 1:  # two baseline records cannot say which level is normal: adopt the new one
                    for x in slow:
                        self._push(x[1])
                    s["slow"] = []
                return out
            if len(slow) >= self._streak_needed():
                shift = self._level_shift(slow)
                if shift is None:  # not above what this run's own jitter reaches over as many records (yet)
                    if len(slow) >= _MAX_TRIAL:  # that long and still not: it was jitter, after all
                        out.extend(self._streak_over(slow, keep=True))
                    return out
                onset = self._onset(slow, level, step, t)
                s["drop"] = open_drop(onset, level, [x[1] for x in slow], step, [x[0] for x in slow],
                                      startup=self._startup(onset), **shift)
                s["slow"] = []
                out.append(self._drop_finding(s["drop"]))
            return out
        out.extend(self._streak_over(slow, keep=False))
        self._push(t)
        cpu = s.get("cpu")
        if cpu is not None and math.isfinite(cpu):
            s["cpu_base"] = (s.get("cpu_base", []) + [cpu])[-_CPU_KEPT:]
        return out

    def _onset(self, slow: list[list[Any]], level: float, step: int, t: float) -> int:
        """Where the slowdown began (`detect.throughput_onset.fit_onset`)."""
        return fit_onset(self.raw.values(), self.raw_steps, slow, level, step, t, self.config.step_time_window,
                         streak_evals(slow))

    def _startup(self, onset: int) -> list[int] | None:
        """A baseline of only the run's first records (`detect.throughput_onset.startup`)."""
        return startup(self._s, self.raw_steps, onset, STARTUP_RECORDS)

    def _block_check(self, step: int, t: float) -> list[Finding]:
        """The noisy-series path (`detect.level_shift`): the latest block of records sits above the
        run's earlier levels although no streak of individually slow records formed."""
        if len(self.raw_steps) != len(self.raw):  # state saved before steps were kept
            return []
        values = self.raw.values()
        if not may_shift(values, t, self.config.drop_min_rel):  # find_shift's first test, on 80 values
            return []
        values.append(t)
        steps = list(self.raw_steps) + [step]
        shift = find_shift(values, self.config.drop_min_rel, z_needed(max(self._s["records"], 1)), steps)
        s = self._s
        end = s.get("drop_end", -1)  # a slowdown back to normal there: reopened over its records only if still slow
        after = [v for v, x in zip(values, steps) if x > end]
        if shift is None or steps[shift.onset] <= end and (
                not after or median(after) < shift.level * (1 + self.config.drop_min_rel)):
            return []
        slow = values[shift.onset:]
        s["drop"] = open_drop(steps[shift.onset], shift.level, slow, step, steps[shift.onset:], spread=shift.spread,
                              usual_max=shift.usual_max, startup=self._startup(steps[shift.onset]))
        s["slow"] = []
        return [self._drop_finding(s["drop"])]

    def _streak_over(self, slow: list[list[Any]], keep: bool) -> list[Finding]:
        """A streak of slow records that made no slowdown: its dips are a stall; with `keep`, the rest
        joins the baseline (it was the run's usual jitter)."""
        out: list[Finding] = []
        for dip in stalls_in(slow):  # the stalls of one or a few records, over now
            out.extend(self._on_dip(dip))
        if keep:
            for x in slow:
                if not x[3]:
                    self._push(x[1])
        self._s["slow"] = []
        return out

    def _level_shift(self, slow: list[list[Any]]) -> dict[str, float] | None:
        """Does the streak's median stand out against the run's own dispersion: above every median of as
        many consecutive records in the recent past (all records, slow ones included), by `drop_min_rel`?
        None when it does not; else the baseline's usual spread (90th percentile over median)."""
        n = len(slow)
        base = self.raw.values()[: max(0, len(self.raw) - (n - 1))]  # before the streak
        if len(base) < n + 2:
            return {"spread": 0.0, "usual_max": math.nan}
        stride = max(1, n // 4)  # overlapping windows: a quarter-window stride misses no burst worth the name
        half = n // 2  # `median` of n >= 1 values is sorted(...)[n // 2]: inlined, ~80 windows per slow record
        usual = max(sorted(base[i: i + n])[half] for i in range(0, len(base) - n + 1, stride)) if n else \
            max(median(base[i: i + n]) for i in range(0, len(base) - n + 1, stride))
        if median([x[1] for x in slow]) <= usual * (1 + self.config.drop_min_rel):
            return None
        mid = median(base)
        return {"spread": quantile(sorted(base), 0.9) / mid - 1 if mid > 0 else 0.0, "usual_max": usual}

    def _streak_needed(self) -> int:
        """Slow records in a row that make a slowdown persistent: at least `drop_records`, more when
        this run's own slow records are common (a jittery dense log), so that a streak that long
        would happen by chance with probability below 1% over the whole run."""
        s = self._s
        streak = len(s["slow"])  # the rate is the run's before this streak
        n = s["records"] - streak
        rate = (s.get("exceed", 0) - streak + _PRIOR_RATE * _PRIOR_RECORDS) / (n + _PRIOR_RECORDS)
        need = math.ceil(math.log(_ALPHA / max(n, 1)) / math.log(rate)) if rate < 1 else _MAX_STREAK
        return max(self.config.drop_records, min(need, _MAX_STREAK))

    def _stats(self, n: int) -> tuple[float, float]:
        """Recent level and data noise (floored at 1%), recomputed every few records: O(window)."""
        c = self._cache
        if c is None or c[2] <= 0 or n < _LEVEL_N:
            level = self.window.median() if n <= _LEVEL_N else median_last(self.window.last(_LEVEL_N))
            sigma = max(self.window.diff_sigma() if n >= 3 else 0.0, 0.01 * level)
            c = self._cache = [level, sigma, _REFRESH]
        return c[0], c[1]

    def _push(self, t: float) -> None:
        self.window.push(t)
        if self._cache is not None:
            self._cache[2] -= 1

    def _in_drop(self, step: int, t: float) -> list[Finding]:
        d = self._s["drop"]
        d.setdefault("records", len(d["values"]))
        cpu = self._s.get("cpu")
        if cpu is not None and math.isfinite(cpu) and len(d.setdefault("cpu", [])) < 64:
            d["cpu"].append(cpu)
        slow_level = recent(d)  # a ramp's latest level, not its first: its new records are no stalls on it
        if t >= _STALL_IN_DROP * slow_level:  # a stall on top of the slowdown, or the start of a higher level
            d["records"] += 1
            return self._stepped_up(d) if hold(d, [step, t, slow_level, self._s.get("why") or []]) else []
        out = self._stalls_on_top(d)  # the slow level is back: they were stalls
        return out + self._at_level(d, step, t)

    def _stalls_on_top(self, d: dict[str, Any]) -> list[Finding]:
        out = []
        for x in release(d):
            d["last_step"] = x[0]
            out.extend(self._on_dip(x))
        return out

    def _stepped_up(self, d: dict[str, Any]) -> list[Finding]:
        """Stalls on top in a row (`detect.slowdown.JUMP_RECORDS`): the slowdown stepped up again. It ends where
        they began, and a new one starts there over the run's old level."""
        over = release(d)
        onset = fit_onset(self.raw.values(), self.raw_steps, over, recent(d), over[-1][0], over[-1][1],
                          self.config.step_time_window, eval_stalls(over))
        onset = max(min(onset, over[0][0]), d["start"] + 1)
        f = self._drop_finding(d)
        f.end_step = min(d["last_step"], onset)
        f.message = f.message.replace(" so far", "", 1) + f"; slower still from step {onset}"
        new = self._s["drop"] = open_drop(onset, d["level"], [x[1] for x in over], over[-1][0],
                                          [x[0] for x in over], spread=d.get("spread", 0.0),
                                          usual_max=d.get("usual_max", math.nan), startup=d.get("startup"))
        return [f, self._drop_finding(new)]

    def _at_level(self, d: dict[str, Any], step: int, t: float) -> list[Finding]:
        if self._back_to_normal(d, t):
            self._s["drop"], self._s["drop_end"] = None, step
            self._push(t)
            f = self._drop_finding(d)
            f.end_step = d["last_step"]
            f.message = f.message.replace(" so far", "", 1) + f"; back to normal at step {step}"
            out = [f]
            excess = d.get("excess", lost(d))  # a passing slowdown is priced like a stall: every second of it
            cheap = excess < self.config.periodic_warn_cost * self._s["total"]
            paid = eval_paid(d, f, excess)
            if d["records"] < PERSISTENT_RECORDS or cheap or paid:  # a passing slowdown: a stall, with the dips
                f.severity = "info"
                f.evidence["transient"] = True  # counted as a stall in the periodic_stall finding
                peak = max(d["peak"], *d["values"]) / d["level"]
                out.extend(self._on_dip([d["start"], d["level"] + excess, d["level"], [EVAL] if paid else [], peak]))
            f.evidence["recovered"] = True  # the incident is over (an alert on it resolves)
            return out
        extend(d, t, step)
        if self._drop_severity(d) != d.get("reported"):  # it has lasted and cost enough: now worth a page
            return [self._drop_finding(d)]
        return []

    def _back_to_normal(self, d: dict[str, Any], t: float) -> bool:
        """One record back at the old level ends a slowdown of a clean series; in a noisy one (one record in
        ten since the onset already looked normal), the median of the last `_EXIT_RECORDS` records must."""
        normal = d["level"] * (1 + 0.5 * self.config.drop_min_rel)
        if "noisy" not in d:
            since = [v for v, at in zip(self.raw.values(), self.raw_steps) if at >= d["start"]]
            d["noisy"] = bool(since) and sum(v <= normal for v in since) >= 0.1 * len(since)
        recent = d["recent"] = (d.get("recent", []) + [t])[-_EXIT_RECORDS:]
        if not d["noisy"]:
            return t <= normal
        return t <= normal and len(recent) == _EXIT_RECORDS and median(recent) <= normal

    def _on_dip(self, dip: list[Any]) -> list[Finding]:
        s = self._s
        step, t, level, why = dip[0], dip[1], dip[2], dip[3]
        # a stall of several records is priced by its whole excess (t) and sized by its slowest record
        peak = dip[4] if len(dip) > 4 else t / level
        d = s["dips"]
        out: list[Finding] = []
        if new_kind(d, t - level, why, _DOMINANT):
            out.append(self._dip_finding(d))  # small earlier dips were jitter; the real stalls start here
            d = None
        if d is None:
            d = s["dips"] = new_stalls(step, level)
        add_stall(d, step, t - level, peak, why)
        d["level"] = level
        regular = new_start(d)
        if regular is not None and regular > d["first"]:
            out.extend(self._split(d, regular))
            d = s["dips"]
        if regular is not None or d["count"] >= STALLS_KEPT // 4:
            d["settled"] = True  # the pattern is known: later jitter among its stalls does not split it
        if d["count"] <= self.config.periodic_min_dips or self._dip_severity(d) != d.get("reported"):
            out.append(self._dip_finding(d))
        return out

    def _split(self, d: dict[str, Any], start: int) -> list[Finding]:
        """Stalls before a regular pattern (every ~P steps) were jitter: close them, key the pattern at its start."""
        early = new_stalls(d["first"], d["level"])
        late = new_stalls(start, d["level"])
        for item in d["items"]:
            add_stall(early if item[0] < start else late, *item)
        self._s["dips"] = late
        return [self._dip_finding(early)] if early["count"] else []

    def _dip_severity(self, d: dict[str, Any]) -> str:
        return stall_severity(d, self._s["total"], self._seconds, self.config)

    def _drop_severity(self, d: dict[str, Any]) -> str:
        d.setdefault("records", len(d["values"]))
        d["contention"] = contention(self._s.get("cpu_base", []), d.get("cpu", []), d["level"], median(d["values"]),
                                     cpu_run=not self._s.get("device"))
        return drop_severity(d, self._s["total"], self._seconds, self.config)

    def _seconds(self, per_record: float) -> float:
        """A step-time difference in seconds per step (inf when the series is a rate, not a time)."""
        if self._timed() != STEP_TIME:
            return float("inf")
        return per_record * (self._s.get("batch") or 1.0)

    # -- findings ---------------------------------------------------------------------------------
    def _drop_finding(self, d: dict[str, Any]) -> Finding:
        sev = d["reported"] = self._drop_severity(d)
        return drop_finding(d, self._timed(), self._s.get("batch") or 1.0, sev, self.name)

    def _timed(self) -> str | None:
        return STEP_TIME if self._s.get("by_clock") and self._s["series"] is None else self._s["series"]

    def _dip_finding(self, d: dict[str, Any]) -> Finding:
        sev = d["reported"] = self._dip_severity(d)
        f = stall_finding(d, self._s["total"], sev, self.name)
        f.evidence["causes_recorded"] = bool(self._s.get("causes_recorded"))
        return f

    def state_dict(self) -> dict[str, Any]:
        return {"window": self.window.state_dict(), "raw": self.raw.state_dict(), "raw_steps": list(self.raw_steps),
                "s": self._s, "alias": self.alias.state_dict(), "clock": self.clock.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.window.load_state_dict(state["window"])
        if "raw" in state:
            self.raw.load_state_dict(state["raw"])
        self.raw_steps = deque(state.get("raw_steps", []), maxlen=_RAW_N)
        self.alias.load_state_dict(state.get("alias", {}))
        self.clock.load_state_dict(state.get("clock", {}))
        self._s = state["s"]
        self._cache = None

