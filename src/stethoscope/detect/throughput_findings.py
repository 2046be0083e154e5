"""What a slowdown or a run of stalls cost the run, what the records say caused it, and the findings'
words. Used by `detect.throughput`.

Severity is the cost to the run, not the deviation: a `throughput_drop` or a `periodic_stall` is a
warning (a person should act now) only once it has lasted (`PERSISTENT_RECORDS`) and cost the run
`WARN_LOST_S` seconds; stalls also `periodic_warn_cost` of the run's time, and a regular
period or a recorded cause (a GC pause, a data wait). A cause is named only with evidence:
`perf/gc_pause_s`, `perf/data_wait_s`, an eval beside the slow step, or the process's own CPU share
(`system/cpu_pct`) falling while its CPU time per step stayed the same - other work on the machine
took the CPU, which is not the run's fault (info, with that cause).
"""

from __future__ import annotations

import math
from typing import Any

from stethoscope.detect.config import DetectConfig
from stethoscope.detect.slowdown import growth, lost, recent
from stethoscope.detect.stall_patterns import is_regular
from stethoscope.findings.catalogue import PERIODIC_STALL, THROUGHPUT_DROP
from stethoscope.records import STEP_TIME, Finding

PERSISTENT_RECORDS = 20  # a slowdown that has lasted fewer records is news, not yet worth a page
WARN_LOST_S = 60.0  # nor one that has cost the run less than a minute: seconds lost are nobody's emergency
# (a rate logged without a step time has no seconds: there only the share and the persistence count)
# A baseline of fewer records than a slowdown needs to persist is the run's start-up (warm-up, caches, lighter
# first batches): a "slowdown" against it is the run's usual speed (info), not a regression from a known level.
STARTUP_RECORDS = PERSISTENT_RECORDS
MIN_STALL_S = 1e-3  # stalls shorter than this (seconds) are never worth a warning, whatever their share
MIN_SLOWDOWN_S = 1e-4  # nor is a persistent slowdown of less than this per step
_CPU_BUSY = 50.0  # % of a core: a process this busy is CPU-bound, its CPU share says where its time went
_CPU_SAMPLES = 3  # CPU samples needed on each side of a slowdown to compare them
# What a slow step can be pinned on, from the record itself; in the order they are named.
REASONS = {
    "eval": ("right after an eval", "eval/* recorded since the previous record"),
    "epoch": ("at an epoch's start", "the epoch counter turned over at that record or the one before"),
    "gc": ("mostly a Python garbage-collection pause", "perf/gc_pause_s"),
    "data": ("mostly waiting for data", "perf/data_wait_s"),
}
_PAID = 1.25  # a slowdown whose excess is at most this times the logged eval time inside it is that eval's
_EVAL_SHARE = 0.8  # of the slow steps right after an eval: the eval's own time (a loader stall, every few steps,
# meets an eval now and then, not nearly every time)
# true whether the run records perf/gc_pause_s and perf/data_wait_s or not: none of what it records explains it
_NO_CAUSE = "nothing recorded at that step explains it (no eval, pause or data wait)"


def contention(cpu_before: list[float], cpu_during: list[float], level: float, slow: float,
               cpu_run: bool = False) -> dict[str, float] | None:
    """Evidence that other work on the machine took the CPU: a CPU-bound process (a run on the CPU, no device
    series: `cpu_run`; else a median `system/cpu_pct` of at least `_CPU_BUSY` before) whose CPU share fell
    while its CPU time per step grew by at most half as much as its wall time per step did - the extra wall
    time was spent waiting for a core (a GPU run waiting on its device shows the same fall: hence the bar).
    None without it."""
    if len(cpu_before) < _CPU_SAMPLES or len(cpu_during) < _CPU_SAMPLES or level <= 0:
        return None
    before, during = median(cpu_before), median(cpu_during)
    if (before < _CPU_BUSY and not cpu_run) or during >= before:
        return None
    wall = slow / level
    cpu = during * slow / (before * level)
    if cpu - 1 > 0.5 * (wall - 1):
        return None
    return {"cpu_pct_before": round(before, 1), "cpu_pct_during": round(during, 1), "cpu_time_ratio": round(cpu, 3)}


def drop_severity(d: dict[str, Any], total: float, seconds: Any, cfg: DetectConfig) -> str:
    """Warning only for a slowdown that has lasted and cost the run real seconds, with no evidence that other
    work on the machine took its CPU (its share of the time since its onset is the slowdown itself, at
    least `drop_min_rel`: BLOOM's slow GPU cost 5%, for weeks)."""
    slow = max(median(d["values"]), recent(d))
    if seconds(slow - d["level"]) < MIN_SLOWDOWN_S:  # microseconds: no one cares
        return "info"
    excess = lost(d)  # block by block: a ramp's cost grows with it
    d["cost"] = excess / total if total > 0 else 0.0
    lost_s = seconds(excess)
    d["lost_s"] = lost_s if math.isfinite(lost_s) else None
    if d["records"] < PERSISTENT_RECORDS or lost_s < WARN_LOST_S or d.get("startup"):
        return "info"
    return "info" if d.get("contention") else "warning"


def stall_severity(d: dict[str, Any], total: float, seconds: Any, cfg: DetectConfig) -> str:
    """Warning only for many stalls that cost a share of the run and real seconds, and that show a regular
    period or a recorded cause a person can act on (GC pauses, data waits); scattered slow steps with no
    cause beside them are a busy machine's jitter (info)."""
    cost = d["excess"] / total if total else 0.0
    if d["count"] < cfg.periodic_min_dips or cost < cfg.periodic_warn_cost:
        return "info"
    if seconds(d["excess"] / max(d["count"], 1)) < MIN_STALL_S or seconds(d["excess"]) < WARN_LOST_S:
        return "info"
    why = d.get("why", {})
    explained = why.get("gc", 0) + why.get("data", 0) >= 0.5 * d["count"]
    if not explained and is_schedule_time(d):
        return "info"  # the evals' or epochs' own time at the cadence the user chose: a cost known in advance
    return "warning" if explained or is_regular(d["items"]) else "info"


def eval_paid(d: dict[str, Any], f: Finding, excess: float) -> bool:
    """Did the evals logged inside a passing slowdown take its excess seconds (`_PAID`)? Then it is their own time,
    spread over the steps after them by a smoothed time (tqdm's `s/it` after an HF eval: 203 s, then 14 s, ... back
    to 7 s): a cost the eval schedule sets (info), counted as an eval's stall. The finding says so."""
    paid = d.get("eval_s", 0.0)
    if paid <= 0 or excess > _PAID * paid:
        return False
    f.message += (f"; the evals logged in it took {fmt(paid)} s (eval/runtime_s): their own time, spread over the "
                  "steps after them by a smoothed step time")
    f.evidence["eval_time"] = True
    return True


def is_eval_time(d: dict[str, Any]) -> bool:
    """Are the slow steps the evals themselves: nearly all of them (`_EVAL_SHARE`) right after an eval? A step
    whose time includes an eval (and the checkpoint save that often goes with it) at a fixed cadence pays for
    the eval: a cost the eval schedule sets, not a stall of the training loop."""
    return d.get("why", {}).get("eval", 0) >= _EVAL_SHARE * d["count"]


def is_schedule_time(d: dict[str, Any]) -> bool:
    """Are nearly all the slow steps (`_EVAL_SHARE`) at the schedule's own boundaries: right after an eval or at an
    epoch's start? A loop pays at each epoch's start for its loader's restart and for the eval or checkpoint at the
    epoch's end (and a time printed as a running average restarts there): a cost the epoch length sets, known in
    advance. A loader stalling every few steps meets a boundary now and then, far from every time."""
    return d.get("boundary", d.get("why", {}).get("eval", 0)) >= _EVAL_SHARE * d["count"]


def drop_finding(d: dict[str, Any], name: str, scale: float, sev: str, source: str) -> Finding:
    """Quoted in the series' own unit (seconds per step, or the rate as logged), with the run's usual
    spread (90th percentile over median, one record) next to it: it was found because its median stood
    above every median of as many records in a row before it. `scale` takes a time per sample to seconds."""
    grown = growth(d)
    slow = grown[1] if grown else median(d["values"])
    rel = slow / d["level"] - 1
    spread = d.get("spread", 0.0)
    duration = d["last_step"] - d["start"]
    usual = d.get("usual_max", math.nan)
    if name == STEP_TIME:
        before, after, usual = d["level"] * scale, slow * scale, usual * scale
        what = f"step time up {rel:.0%} ({fmt(before)} -> {fmt(after)} s)"
        first = None if grown is None else fmt(grown[0] * scale) + " s"
    else:  # a rate, watched inverted: quote the rate itself
        before, after, usual = 1.0 / d["level"], 1.0 / slow, 1.0 / usual
        what = f"{name} down {1 - after / before:.0%} ({fmt(before)} -> {fmt(after)})"
        first = None if grown is None else fmt(1.0 / grown[0])
    if grown is not None:  # a ramp: say so, and how far it has come
        what += (f" and growing: from {first} at step {d.get('first_at', d['start'])} to {fmt(after)}"
                 f"{' s' if name == STEP_TIME else ''} at step {d['last_step']}")
    cost = d.get("cost")
    lost_s = d.get("lost_s")
    price = "" if cost is None else f", costing {cost:.1%} of the run time" + (
        f" ({fmt(lost_s)} s)" if lost_s is not None else "")
    msg = (f"throughput dropped from step {d['start']}: {what}, against a usual spread of +{spread:.0%} "
           f"(90th percentile), for {duration} steps so far{price}")
    ev = {"series": name, "level": before, "slow_level": after, "slowdown": rel, "typical_spread": spread,
          "duration_steps": duration, "records": d.get("records", len(d["values"])),
          "usual_worst_level": usual, "time_cost": cost, "lost_s": lost_s, "growing": grown is not None}
    startup = d.get("startup")
    if startup:
        n, first, last = startup
        msg += (f"; the level it is compared with is only the run's first {n} record{'s' if n > 1 else ''} (steps "
                f"{first}-{last}): start-up (warm-up, caches, lighter first batches), not a known usual speed")
        ev["startup_records"] = n
    causes = [f"start-up: the run's first {startup[0]} records ran faster; fewer than {STARTUP_RECORDS} records "
              "make no level to call a slowdown against"] if startup else []
    busy = d.get("contention")
    if busy:
        ev.update(busy)
        causes.append(f"other work on the machine took the CPU: this process's CPU share fell from "
                      f"{busy['cpu_pct_before']:.0f}% to {busy['cpu_pct_during']:.0f}% (system/cpu_pct) while its "
                      f"CPU time per step stayed x{busy['cpu_time_ratio']:.2f}; not the run's own doing")
    return Finding(THROUGHPUT_DROP, sev, d["start"], msg, evidence=ev, causes=causes, source=source)


def stall_finding(d: dict[str, Any], total: float, sev: str, source: str) -> Finding:
    cost = d["excess"] / total if total else 0.0
    steps = [item[0] for item in d["items"]]
    gaps = sorted(b - a for a, b in zip(steps, steps[1:]))
    period = gaps[len(gaps) // 2] if gaps else None
    regular = is_regular(d["items"])
    why = d.get("why", {})
    known = [k for k in REASONS if why.get(k)]
    if d["count"] == 1:
        what = " and ".join(f"{REASONS[k][0]} ({REASONS[k][1]})" for k in known) if known else _NO_CAUSE
        msg = f"one slow step at {d['first']} (x{d['worst']:.3g} the usual time): {what}; harmless once"
    else:
        every = f", about every {period} steps" if regular and period else ", at no regular interval"
        what = ", ".join(f"{why[k]} of them {REASONS[k][0]}" for k in known) if known else \
            _NO_CAUSE.replace("that step explains it", "those steps explains them")
        kind = "periodic stalls" if regular else "scattered slow steps"
        msg = (f"{d['count']} slow steps since step {d['first']}{every} (up to x{d['worst']:.3g} the usual "
               f"time), costing {cost:.1%} of the run time: {kind} ({what})")
    ev = {"dips": d["count"], "dip_steps": list(steps), "worst_ratio": d["worst"], "time_cost": cost,
          "period_steps": period if regular else None, "median_gap_steps": period, "regular": regular, "explained_by": dict(why)}
    causes = [f"{why[k]} of {d['count']} slow steps were {REASONS[k][0]} ({REASONS[k][1]})" for k in known]
    if sev == "info" and is_eval_time(d) and d["count"] > 1:
        msg += ("; these are the evals' own time (and the checkpoint saves that go with them) at the cadence the run "
                "chose, not a stall of the training loop: evaluate less often if that cost is too high")
        ev["eval_time"] = True
    elif sev == "info" and is_schedule_time(d) and d["count"] > 1:
        msg += (f"; these fall at the epochs' starts{' or right after evals' if why.get('eval') else ''}: the data "
                "loader's restart, the eval or checkpoint at the epoch's end, or a time printed as a running average "
                "that restarts with the epoch: a cost of the epoch schedule, not a stall of the training loop "
                "(persistent_workers=True, evaluate or save less often if it is too high)")
        ev["epoch_time"] = True
    return Finding(PERIODIC_STALL, sev, d["first"], msg, evidence=ev, causes=causes, source=source)


def quantile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return math.nan
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def median(values: list[float]) -> float:
    return quantile(sorted(values), 0.5)


def fmt(x: float) -> str:
    return f"{x:,.4g}" if abs(x) < 1e4 else f"{x:,.0f}"
