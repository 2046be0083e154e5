"""Stall patterns: the slow steps of one kind (GC pauses, evals, I/O), counted and priced together, and
whether they fall on a regular grid (every ~P steps) from some stall on. Used by `detect.throughput`."""

from __future__ import annotations

from typing import Any

STALLS_KEPT = 32
_KIND = 4.0  # a stall under 1/_KIND of a rhythm's median cost is not one of its beats (`beat_start`)
_BEATS = 4  # stalls one period apart in a row that make a rhythm (`beat_start`)
EPOCH = "epoch"  # the cause `detect.throughput_causes` records for a slow step at an epoch's start
EVAL = "eval"  # the cause `detect.throughput` records for a slow step right after an eval  # the newest stalls of a pattern kept for its period and its typical size


def new_stalls(step: int, level: float) -> dict[str, Any]:
    return {"first": step, "items": [], "count": 0, "excess": 0.0, "worst": 0.0, "level": level, "biggest": 0.0}


def add_stall(d: dict[str, Any], step: int, excess: float, ratio: float, why: list[str]) -> None:
    d["count"] += 1
    counts = d.setdefault("why", {})
    for k in why:
        counts[k] = counts.get(k, 0) + 1
    if EVAL in why or EPOCH in why:  # the schedule's own boundaries (`throughput_findings.is_schedule_time`)
        d["boundary"] = d.get("boundary", 0) + 1
    d["excess"] += excess
    d["worst"] = max(d["worst"], ratio)
    items = d["items"] + [[step, excess, ratio, why]]
    if len(items) > STALLS_KEPT:  # the pattern's stalls no longer kept, and how many of them no eval explains
        d["dropped"] = d.get("dropped", 0) + 1
        d["own_dropped"] = d.get("own_dropped", 0) + (EVAL not in items[0][3])
    d["items"] = items[-STALLS_KEPT:]
    # the pattern's typical big stall (90th percentile of the kept ones): one odd outlier among small
    # stalls does not stop a new, much bigger kind of stall from being seen as new
    d["biggest"] = _quantile(sorted(item[1] for item in d["items"]), 0.9)
    own = [item[1] for item in d["items"] if EVAL not in item[3]]
    d["biggest_own"] = _quantile(sorted(own), 0.9) if own else d["biggest"]


def new_kind(d: dict[str, Any] | None, excess: float, why: list[str], dominant: float) -> bool:
    """Is a stall `dominant` times bigger than the pattern's typical big one: a new kind of stall, its own
    pattern? Stalls an eval explains are the eval's (it takes what it takes): a stall no eval explains is
    measured against the unexplained ones of the pattern (when there are any), an eval's against all."""
    if d is None:
        return False
    return excess >= dominant * d.get("biggest" if EVAL in why else "biggest_own", d.get("biggest", 0.0))


def stalls_in(slow: list[list[Any]]) -> list[list[Any]]:
    """The stalls in a streak of slow records ([step, time, level, dip, causes] each, over now): its dips, as
    one stall per run of records with one cause about the eval ([first step, level + excess, level, causes of
    its slowest record, its slowest record over the level]). An eval's record and a loader stall in the record
    after it are two stalls of two kinds, each with its own step: merged, the loader's stall was dated at the
    eval and its rhythm (every P steps) lost a beat."""
    dips = [x for x in slow if x[3]]
    runs: list[list[list[Any]]] = []
    for x in dips:
        if runs and (EVAL in runs[-1][-1][4]) == (EVAL in x[4]):
            runs[-1].append(x)
        else:
            runs.append([x])
    level0 = slow[0][2] if slow else 0.0
    out = []
    for run in runs:
        slowest = max(run, key=lambda x: x[1] / x[2])
        out.append([run[0][0], level0 + sum(x[1] - x[2] for x in run), level0, slowest[4], slowest[1] / slowest[2]])
    return out


def grid(steps: list[int]) -> tuple[int, float]:
    """(period, tolerance) of stalls at `steps` (2 or more): the median gap, and 15% of it (at least a step)."""
    gaps = sorted(b - a for a, b in zip(steps, steps[1:]))
    period = gaps[len(gaps) // 2]
    return period, max(1.0, 0.15 * period)


def regular_start(items: list[list[Any]]) -> int | None:
    """The first stall of a regular pattern (stalls every ~P steps, P the median gap, other stalls in
    between allowed): the earliest stall, followed by another within 1.5 P, from which at least 3 later
    stalls, and most of them, fall on its grid start + k*P (within 15% of P). None when no such pattern
    exists yet."""
    steps = [it[0] for it in items]
    if len(steps) < 4:
        return None
    period, tol = grid(steps)
    if period <= 0:
        return None
    for i, start in enumerate(steps[:-2]):
        if steps[i + 1] - start > 1.5 * period:
            continue  # a pattern's first stall is followed by its second one period later, not after a hole
        later = steps[i:]
        on_grid = [s for s in later if abs((s - start) - period * round((s - start) / period)) <= tol]
        if len(on_grid) >= 3 and len(on_grid) >= 0.6 * len(later):
            return start
    return None


def new_start(d: dict[str, Any]) -> int | None:
    """Where a pattern's regular stalls begin: `regular_start` until it settled, then `beat_start`."""
    if d.get("settled"):
        return beat_start(d["items"], d.get("own_dropped", 0), d.get("dropped", 0))
    return regular_start(d["items"])


def beat_start(items: list[list[Any]], own_dropped: int = 0, dropped: int = 0) -> int | None:
    """Where a new rhythm began in a pattern that was not regular when it settled (scattered slow steps of a
    busy machine, then a data loader that stalls every P steps): the first stall of the unbroken chain of
    `_BEATS` or more stalls one period apart that ends at the newest stall, unless 3/4 of the stalls before it
    fall on that chain's grid (the same rhythm with a beat missed: no new start; a busy machine's scattered
    stalls fall on it by chance at about (2 tol + 1) / period). None otherwise. A beat is a stall of the
    chain's kind: one under 1/`_KIND` of the chain's median cost (a busy machine's 13 ms slow step one period
    before a loader's 170 ms stalls) is a scattered one that fell on the grid by chance, not the rhythm's start.
    A stall an eval explains keeps the eval's own rhythm (every eval interval): the chain and its period are
    found among the others, when there are `_BEATS` of them; when only evals came before the chain (none of the
    pattern's own stalls, kept or `own_dropped`), the chain is a new rhythm wherever the evals fall. A pattern
    that `dropped` its oldest stalls is judged on `_BEATS` or more kept ones before the chain, or not at all."""
    every = [it[0] for it in items]  # the stalls before the chain, the evals' too, are the ones it could be part of
    own = [it for it in items if len(it) < 4 or EVAL not in it[3]]
    pool = items  # a loader stall that falls on an eval's step is counted as the eval's: still one of its beats
    items = own if len(own) >= _BEATS else items
    steps = [it[0] for it in items]
    if len(steps) < _BEATS:
        return None
    period, tol = grid(steps)
    if period <= 0:
        return None
    start, sizes = steps[-1], [items[-1][1]]
    chain = 1
    # strictly earlier stalls only: with a period of 1 step and its tolerance of 1, a stall was its own
    # predecessor and the walk never ended (a live run's stalls every step hung `diagnose`)
    at = start
    while prev := [it for it in pool if it[0] < at and abs(at - it[0] - period) <= tol
                   and it[1] * _KIND >= sorted(sizes)[len(sizes) // 2]]:
        beat = max(prev, key=lambda it: it[0])
        at = beat[0]
        sizes.append(beat[1])
        if beat in items:  # the chain starts at a beat of its own kind, never at an eval on its grid
            start, chain = at, len(sizes)
    before = [x for x in every if x < start]
    if before and at == start and not own_dropped and not any(x < start for x in steps):
        # only evals before a chain of other stalls that no eval led into: a new rhythm (evals every 40 steps
        # fall on a loader's every-8 grid as often as not; they are the eval's own time, not its missed beats)
        return start if chain >= _BEATS else None
    if dropped and len(before) < _BEATS:  # the rhythm may go back past the kept stalls: no new start seen
        return None
    on_grid = sum(abs((start - x) - period * round((start - x) / period)) <= tol for x in before)
    return start if chain >= _BEATS and before and on_grid < 0.75 * len(before) else None


def _quantile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))] if sorted_values else float("nan")


def is_regular(items: list[list[Any]]) -> bool:
    """Do the stalls keep a period: a regular pattern (`regular_start`) that holds at least half of them, stalls
    on at least 3/4 of its grid points, and more of them on the grid than chance puts there (a binomial z of
    3): scattered slow steps of a busy machine fall on some grid now and then, skipping most of its beats;
    a GC every N steps stalls on every beat."""
    start = regular_start(items)
    if start is None:
        return False
    steps = [it[0] for it in items]
    later = [s for s in steps if s >= start]
    if 2 * len(later) < len(steps):
        return False
    period, tol = grid(steps)
    chance = min(1.0, (2 * int(tol) + 1) / period)  # the share of steps on the grid, at random
    if chance >= 0.5:
        return True  # a period of a few steps: the grid holds most steps, regular_start's answer stands
    hits = sum(abs((s - start) - period * round((s - start) / period)) <= tol for s in later)
    n = len(later)
    beats = round((later[-1] - start) / period) + 1  # grid points from the first stall to the last
    if hits < 0.75 * beats:  # a period skips no beat (GC every N steps stalls every N steps); chance does
        return False
    return (hits - n * chance) / (n * chance * (1 - chance)) ** 0.5 >= 3.0
