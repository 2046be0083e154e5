"""Labelled synthetic runs for `diagnosis_accuracy.py --synthetic`: REAL tiny training runs with faults.

Runs (`synthetic_train.py`) vary model width (hidden 128/256/512), seed, batch (32/64/128), optimizer
(Adam, AdamW, SGD+momentum), LR schedule (constant, warm-up+cosine), fp16 loss scaling and the fault's
place and strength. Each is written through every writer variant of its split
(`synthetic_writers.py`). The DEVELOPMENT set is seeds 0-4; the HELD-OUT set is seeds 5-9, written
through the development writers AND writer variants no development run uses. Tune on dev; report
held-out. (Seeds 2-4 were held out first; once their figure had been seen and the detectors tuned on
dev, they joined dev and seeds 5-9, never looked at before, became the held-out set.)

Labels are the injected faults, measured on the raw per-iteration trace where the truth is a measured
fact, then placed at the first log row that shows them in each writer's own step numbering:

* `lr_too_high` (LR x10/30/100 at iteration F): `lr_schedule` at F (the LR series jumps: the mistake
  a user must see); `divergence` at F+1 (the first loss the new LR can touch) when the loss did not come
  back (the median of the last 100 losses above the 90th percentile of the 50 before F, or a NaN); `loss_spike`
  at the first clear spike after F (see `garbage_batch`; later spikes are unscored: at that LR the loss
  spikes again and again); `nan` at the first non-finite loss;
  `grad_explosion` (no step) when the logged grad norm reaches 10x its pre-fault median (unscored where
  the writer logs no grad norm: nanoGPT's console line).
* `nan_batch`: `nan` at the first non-finite loss (the NaN gradient poisons the weights).
* `garbage_batch` (part of one batch replaced by random tokens): `loss_spike` at F when that loss is a
  clear spike (above the median of the 50 losses before by twice their largest excursion).
* `tiny_dataset` (300-800 characters) and `data_repeat` (from F, a window of 500-2000 samples cycled):
  `overfitting` at the eval minimum, when the last eval is at least 2% above it.
* `lr_too_low` (LR / 1000-10000 from the start, / 10^4-10^5 for SGD+momentum): `underfitting` at the first logged step when the last
  100 losses stayed within 15% of the first 10. Not also `plateau`: the diagnosis turns a plateau that
  holds from the start into the `underfitting` verdict (the plateau is its symptom), and one incident
  is one label.
* `lr_zero` (a scheduler bug: LR 0 from F): `plateau` at the first logged step whose LR is 0.
  `lr_schedule` is unscored there (a finding naming the LR drop names the same cause).
* `schedule_reset` (a resume that rebuilt the scheduler: warm-up restarts at F): `lr_schedule` at F. It
  is a user-visible problem (the LR climbs back to its peak mid-run, undoing the decay), so it is
  labelled; the loss bump it may cause is unscored (`loss_spike`).
* `loss_scale_collapse` (fp16: overflows halve the scale every 2-8 iterations from F, then every step
  at the floor of 1 is skipped): `plateau` (a `loss_scale_collapse` finding counts for it, see the
  scoring rules) at its onset as the log shows it: at F, the first halving, where the writer logs the
  loss scale; else at the first iteration at the floor, where the loss stops improving.
* `gc_stalls` (a 40 ms pause every 20-50 iterations from F) and `slow_storage` (every step 2-3x slower
  from F): `throughput_drop` at F. Step times are real wall-clock times on a shared machine, so
  throughput is scored only in these two scenarios, and only from F on (unscored elsewhere), until the
  machine itself slows down by 30% or more against the fault's own level (`_machine_slowdown`).
* `healthy`, `healthy_fp16` (fp16 with the odd overflow-skipped step): `healthy`.

A label whose event the writer cannot show is dropped and its type unscored in that case: a one-batch
spike that an averaging writer dilutes below its neighbours, or a last-value writer never logs; a
stall no logged row holds; throughput in a writer that logs no step time (the HF Trainer).
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from synthetic_train import GENERATOR_VERSION, RunSpec, Trace, cached_trace, corpus
from synthetic_writers import VARIANTS, Variant, rows, write

SPLITS = {"dev": (0, 1, 2, 3, 4), "heldout": (5, 6, 7, 8, 9)}
# More development seeds where five showed too few of a class that the held-out half had (a divergence
# that recovered late, a jump that stays elevated): seeds from 10 on are never held out.
DEV_EXTRA = {"lr_too_high": tuple(range(10, 30))}
SCENARIOS = ("healthy", "healthy_fp16", "lr_too_high", "nan_batch", "garbage_batch", "tiny_dataset", "lr_too_low",
             "lr_zero", "schedule_reset", "loss_scale_collapse", "data_repeat", "gc_stalls", "slow_storage")
Event = tuple[str, int | None]  # (label type, iteration)


def spec(scenario: str, seed: int) -> RunSpec:
    """The run of one scenario and seed: everything that is not the fault is drawn from the seed."""
    r = random.Random(f"{scenario}/{seed}")
    opt = r.choice(("adam", "adamw", "sgd"))
    cosine = r.random() < 0.5
    s = RunSpec(scenario, seed, hidden=r.choice((128, 256, 512)), batch=r.choice((32, 64, 128)), optimizer=opt,
                lr=(0.1 if opt == "sgd" else 3e-3) * r.choice((0.5, 1.0, 1.5)),
                schedule="cosine" if cosine else "constant", warmup=r.choice((50, 100)) if cosine else 0,
                fault_at=r.randrange(450, 850), fp16=scenario == "healthy_fp16")
    tweak: dict[str, Callable[[], dict[str, Any]]] = {
        "lr_too_high": lambda: {"strength": r.choice((10, 30, 100))},
        "garbage_batch": lambda: {"strength": r.choice((0.5, 0.75, 1.0))},
        "tiny_dataset": lambda: {"train_chars": r.choice((300, 500, 800)), "eval_every": 25},
        "data_repeat": lambda: {"strength": r.choice((500, 1000, 2000)), "eval_every": 25,
                                "fault_at": r.randrange(300, 500)},
        "lr_too_low": lambda: {"lr": s.lr / r.choice((1000, 3000, 10000)) / (10 if opt == "sgd" else 1)},
        "schedule_reset": lambda: {"schedule": "cosine", "warmup": r.choice((50, 100))},
        "loss_scale_collapse": lambda: {"fp16": True, "strength": r.choice((2, 4, 8)), "fault_at": r.randrange(450, 700)},
        "gc_stalls": lambda: {"strength": r.choice((20, 25, 40, 50))},
        "slow_storage": lambda: {"strength": r.choice((2.0, 2.5, 3.0))},
    }
    return replace(s, **tweak[scenario]()) if scenario in tweak else s


# -- labels in iterations, measured on the raw trace -----------------------------------------------
def _finite(xs: list[float]) -> list[float]:
    return [x for x in xs if math.isfinite(x)]


def _first_nonfinite(xs: list[float], start: int = 0) -> int | None:
    return next((i for i in range(start, len(xs)) if not math.isfinite(xs[i])), None)


_NOISE_ROWS = 10  # rows a log needs before its noise, and so a clear spike, shows


def _clear_spike(x: float, window: list[float]) -> bool:
    """Unmistakable in the log: above the window's median by twice the window's largest excursion."""
    w = _finite(window)
    if not w or not math.isfinite(x):
        return False
    med = statistics.median(w)
    return x - med > 2 * (max(w) - med)


def _overfit(t: Trace) -> list[Event]:
    best = min(t.evals, key=lambda e: e[1])
    return [("overfitting", best[0])] if t.evals[-1][1] >= 1.02 * best[1] else []


def events(s: RunSpec, t: Trace) -> tuple[list[Event], list[str]]:
    """The run's labels in 0-based iterations, and the types it has no ground truth for."""
    f = s.fault_at
    unscored = [] if s.scenario in ("gc_stalls", "slow_storage") else ["throughput_drop"]
    # the top of the usual range of the 50 losses before the fault (90th percentile: the max of 50 noisy
    # per-batch losses is an outlier, and a loss that stayed 35% up would count as come back under it)
    pre = sorted(_finite(t.loss[f - 50: f])) or [math.inf]
    before = pre[int(0.9 * (len(pre) - 1))]
    if s.scenario == "lr_too_high":
        out: list[Event] = [("lr_schedule", f), ("grad_explosion", None)]
        tail = t.loss[-100:]
        bad = _first_nonfinite(t.loss)
        if bad is not None or statistics.median(tail) > before:
            out.append(("divergence", f + 1))
        jump = next((i for i in range(f + 1, len(t.loss))
                     if not math.isfinite(t.loss[i]) or _clear_spike(t.loss[i], t.loss[f - 50: f])), None)
        out += [("loss_spike", jump)] if jump is not None and jump != bad else []
        out += [("nan", bad)] if bad is not None else []
        return out, unscored
    if s.scenario == "nan_batch":
        return [("nan", _first_nonfinite(t.loss))], unscored
    if s.scenario == "garbage_batch":
        return ([("loss_spike", f)] if _clear_spike(t.loss[f], t.loss[f - 50: f]) else []), unscored
    if s.scenario in ("tiny_dataset", "data_repeat"):
        found = _overfit(t)
        ambiguous = not found and t.evals[-1][1] > min(e for _, e in t.evals)  # rose, but by less than 2%
        return found, unscored + (["overfitting"] if ambiguous else [])
    if s.scenario == "lr_too_low":
        learned = statistics.median(t.loss[-100:]) < 0.85 * statistics.median(t.loss[:10])
        return ([] if learned else [("underfitting", 0)]), unscored + (["underfitting", "plateau"] if learned else [])
    if s.scenario == "lr_zero":
        return [("plateau", f)], unscored + ["lr_schedule"]
    if s.scenario == "schedule_reset":
        return [("lr_schedule", f)], unscored + ["loss_spike"]
    if s.scenario == "loss_scale_collapse":
        floor = next(i for i in range(f, len(t.loss_scale)) if t.loss_scale[i] <= 1.0)
        return [("plateau", floor)], unscored
    if s.scenario in ("gc_stalls", "slow_storage"):
        return [("throughput_drop", f)], unscored
    return [("healthy", None)], unscored


# -- labels in a writer's steps ----------------------------------------------------------------------
def _first_row(v: Variant, logged: list[int], it: int) -> int | None:
    return next((i for i in logged if i >= it), None)


def _stall_row(s: RunSpec, v: Variant, logged: list[int]) -> int | None:
    """The first logged row that holds a stalled iteration (a last-value writer may log none)."""
    if v.mean or s.scenario == "slow_storage":
        return _first_row(v, logged, s.fault_at)
    period = int(s.strength)
    return next((i for i in logged if i >= s.fault_at and (i - s.fault_at) % period == 0), None)


def _spike_shows(t: Trace, v: Variant, row_it: int, it: int) -> bool:
    """Is the logged loss at that row a clear spike against the logged losses of the 50 iterations before
    the event, and at least the `_NOISE_ROWS` rows before it? A one-batch spike averaged over 25 iterations
    may not be; and two or three rows cannot show the log's noise (the largest excursion of three rows
    of a 20-step average is a fraction of what the next ten show)."""
    logged = rows(t, v)
    at = next(r["loss"] for r in logged if r["step"] == row_it + v.offset)
    prior = [r for r in logged if r["step"] < row_it + v.offset]
    window = [r["loss"] for r in prior if r["step"] >= it - 50 + v.offset]
    return _clear_spike(at, window if len(window) >= _NOISE_ROWS else [r["loss"] for r in prior[-_NOISE_ROWS:]])


def _grad_exploded(s: RunSpec, t: Trace, v: Variant) -> bool:
    """Does the logged grad norm (the last iteration's of each row) reach 10x its median over the 50
    iterations before the fault? Measured on what the log shows, not on the diagnosis."""
    logged = v.logged(len(t.grad_norm))
    pre = sorted(t.grad_norm[i] for i in logged if s.fault_at - 50 <= i < s.fault_at) or [math.inf]
    ref = pre[len(pre) // 2]
    return any(math.isfinite(t.grad_norm[i]) and t.grad_norm[i] >= 10 * ref for i in logged if i >= s.fault_at)


def _machine_slowdown(s: RunSpec, t: Trace) -> int | None:
    """The first iteration 50 or more after the fault from which the machine itself ran >= 30% slower
    for 50 iterations than in the 50 iterations after the fault (the fault's own level: a sleep also slows
    the steps after it, cold caches and clocks, so the level is measured, not assumed). For GC stalls
    without the stalled iteration and the 3 after it. Such a slowdown is real and in the log, but nobody
    labelled it: throughput findings from there on are unscored."""
    f = s.fault_at
    period = int(s.strength)
    own = [x for i, x in enumerate(t.step_time)
           if s.scenario != "gc_stalls" or i < f or (i - f) % period > 3]
    expected = statistics.median(own[f: f + 50])
    for i in range(f + 50, len(own) - 49):
        if statistics.median(own[i: i + 50]) >= 1.3 * expected:
            return _iteration_of(s, i)
    return None


def _iteration_of(s: RunSpec, kept_index: int) -> int:
    """The iteration of the `kept_index`-th step kept by `_machine_slowdown` (GC stalls drop some)."""
    if s.scenario != "gc_stalls" or kept_index < s.fault_at:
        return kept_index
    period = int(s.strength)
    kept = kept_index - s.fault_at  # steps kept after the fault: period - 4 per period
    cycles, rest = divmod(kept, period - 4)
    return s.fault_at + cycles * period + 4 + rest


def _stop_shows(t: Trace, v: Variant, it: int) -> bool:
    """Can the loss curve alone place a stop of learning at `it` within the scorer's +-2 logged rows?
    Only when the run was still learning (`_still_learning`) and the loss fell, over the 2 rows before
    the stop, by more than one row's noise: the OLS slope per row of the last 30 logged losses before
    `it`, against the spread of those losses around that line. When the drift per row is a small
    fraction of the noise (measured on the dev runs: noise 12-380x the drift), where a flat stretch
    begins is known only to within many rows, and no detector can date it to +-2."""
    if not _still_learning(t, it):
        return False
    ys = [r["loss"] for r in rows(t, v) if r["step"] < it + v.offset and math.isfinite(r["loss"])][-30:]
    if len(ys) < 10:
        return False
    n = len(ys)
    mx, my = (n - 1) / 2, statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in enumerate(ys)) / sum((x - mx) ** 2 for x in range(n))
    noise = statistics.pstdev([y - (my + slope * (x - mx)) for x, y in enumerate(ys)])
    return -2 * slope > noise


def _still_learning(t: Trace, it: int) -> bool:
    """Was the loss still coming down before `it` (>= 3% between the medians of iterations it-300..it-250
    and it-50..it)? Only then does a stop at `it` show in a loss curve with nothing else logged."""
    early, late = _finite(t.loss[max(0, it - 300): max(1, it - 250)]), _finite(t.loss[max(0, it - 50): it])
    if not early or not late:
        return False
    return statistics.median(late) <= 0.97 * statistics.median(early)


def labels_for(s: RunSpec, t: Trace, v: Variant) -> tuple[list[dict[str, Any]], list[str], list[dict[str, Any]]]:
    """The labels in this writer's step numbering, the types unscored for this case, and the spans of
    steps where one type has no ground truth."""
    evs, unscored = events(s, t)
    unscored = list(unscored)
    logged = v.logged(len(t.loss))
    out, spans = [], []
    if s.scenario in ("gc_stalls", "slow_storage"):  # before the fault: a shared machine's own jitter
        spans.append({"type": "throughput_drop", "from": 0, "to": s.fault_at + v.offset - 1})
        shift = _machine_slowdown(s, t)
        if shift is not None:  # after it, the machine's own slowdown: real, but not what was injected
            spans.append({"type": "throughput_drop", "from": shift - 50 + v.offset,
                          "to": len(t.loss) + v.offset})
    for kind, it in evs:
        if kind == "plateau" and s.scenario == "loss_scale_collapse" and v.has_loss_scale:
            it = s.fault_at  # the collapse shows from its first halving where the scale is logged
        elif kind == "plateau" and s.scenario == "loss_scale_collapse" and not _stop_shows(t, v, it):
            unscored.append(kind)  # no scale logged and nothing in the loss places the stop: no ground truth
            continue
        elif kind == "plateau" and s.scenario == "lr_zero" and not v.has_lr and not _stop_shows(t, v, it):
            unscored.append(kind)  # no LR logged: likewise
            continue
        if kind == "lr_schedule" and not v.has_lr:
            unscored.append(kind)  # a log without the LR shows no schedule event
            continue

        row: int | None
        if kind in ("healthy", "grad_explosion") or it is None:
            if kind == "grad_explosion" and not (v.has_grad_norm and _grad_exploded(s, t, v)):
                continue  # a log without the grad norm cannot show it
            out.append({"type": kind, "step": None, "note": s.name, "confidence": "high"})
            continue
        if kind == "overfitting":
            row = it  # evals are logged at their own step by every writer
        elif kind == "underfitting":
            row = logged[0]
        elif kind == "throughput_drop":
            row = _stall_row(s, v, logged) if v.has_step_time else None
        else:
            row = _first_row(v, logged, it)
        if kind == "loss_spike" and row is not None and not _spike_shows(t, v, row, it):
            row = None
        if row is None:
            unscored.append(kind)
            continue
        if kind == "loss_spike" and s.scenario == "lr_too_high":  # at that LR it spikes again and again
            spans.append({"type": "loss_spike", "from": row + v.offset + 1, "to": len(t.loss) + v.offset})
        out.append({"type": kind, "step": row + v.offset, "note": f"{s.name}: iteration {it}", "confidence": "high"})
    return out, unscored, spans


def generate(workdir: Path, splits: tuple[str, ...] = ("dev", "heldout"), log: Callable[[str], None] = print
             ) -> list[dict[str, Any]]:
    """Train (or read from the cache) every run of the splits, write it through its writers; returns
    bench cases with labels, split and format."""
    text: str | None = None
    cases = []
    t_all, trained = time.perf_counter(), 0
    for split in splits:
        runs = [(seed, scenario) for seed in SPLITS[split] for scenario in SCENARIOS]
        if split == "dev":
            runs += [(seed, scenario) for scenario, seeds in DEV_EXTRA.items() for seed in seeds]
        for seed, scenario in runs:
            s = spec(scenario, seed)
            if text is None:
                text = corpus()
            trace, fresh = cached_trace(s, text)
            if fresh:
                trained += 1
                log(f"  trained {s.name} ({s.optimizer}, h{s.hidden}, b{s.batch}, {s.schedule}) in {trace.seconds:.1f} s")
            for v in VARIANTS:
                if v.heldout_only and split != "heldout":
                    continue
                labels, unscored, spans = labels_for(s, trace, v)
                path = write(trace, workdir / f"{s.name}-{v.name}", v)
                cases.append({"case": f"{s.name}-{v.name}", "path": str(path), "labels": labels,
                              "unscored": unscored, "unscored_spans": spans, "split": split, "format": v.fmt,
                              "variant": v.name, "new_writer": v.heldout_only})
    log(f"synthetic v{GENERATOR_VERSION}: {len(cases)} cases, {trained} runs trained, "
        f"{time.perf_counter() - t_all:.0f} s")
    return cases


if __name__ == "__main__":
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        for c in generate(Path(d), tuple(sys.argv[1:]) or ("dev", "heldout")):
            print(c["case"], [(lb["type"], lb["step"]) for lb in c["labels"]], c["unscored"])
