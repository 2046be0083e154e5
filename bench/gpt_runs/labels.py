"""The labels of one run in one format, computed from the run itself and what that format showed.

Rules, fixed before any scoring. "Row" is a logged train row of the format (its step in the format's
own numbering, the iterations it covers, the loss it shows); the "onset row" is the first row that
covers an iteration at or after the fault's iteration F.
* nan: `nan` at the first row that shows a non-finite value (loss or grad norm); if none does (the HF
  Trainer's NaN filter turns a NaN loss into a finite one), at the first eval that does.
* lr_jump: `lr_schedule` at the onset row where the format shows the LR. `divergence` at the onset row
  when the loss stayed up, judged on the run's every iteration (the same for every format): a non-
  finite loss from F on, or the median of the last fifth of the run's losses above the 90th
  percentile of the 50 losses before F; then also `nan` at the first
  non-finite row. Loss spikes and grad explosions from the onset on are unscored (that LR spikes again
  and again).
* lr_spike: `divergence` as above when the loss stayed up; else `loss_spike` at the first row, from
  the onset to 10 iterations after the high LR ended, whose loss is above the median of the rows covering
  the 50 iterations before F by twice their largest excursion from that median; when no row shows such a
  spike there is no label and loss spikes are unscored. `lr_schedule` is unscored (a few iterations of
  a high LR: a finding naming it names the cause), and so are spikes and grad explosions from the
  onset to 30 iterations after the high LR (the aftershocks).
* frozen: `plateau` at the onset row (the LR is still shown as scheduled: nothing else tells).
* stall / slowdown: `throughput_drop` at the onset row where the format shows time (nanoGPT's per-
  iteration time, W&B's `_timestamp`, TensorBoard's wall times); throughput before the onset is
  unscored (a shared machine's jitter), and throughput is unscored on every other run.
* overfitting, on every run: `overfitting` at the eval minimum (the format's eval step) when the last
  eval is 2% or more above it; for nan, lr_jump, lr_spike and frozen runs only the evals before F count
  (the fault changes the curve after it).
* healthy: `healthy` on a healthy run when no other label holds.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

END = 10**9
BASELINE = 50  # iterations before the fault that set its baseline


def _onset_row(rows: list, it: int) -> tuple | None:
    return next((r for r in rows if r[2] >= it), None)


def _before(rows: list, it: int) -> list[float]:
    """The losses the rows covering the 50 iterations before `it` show (the same span in every format)."""
    return [r[3] for r in rows if it - BASELINE <= r[2] < it and math.isfinite(r[3])]


def _stayed_up(rows: list, it: int) -> bool:
    before = _before(rows, it)
    after = [r for r in rows if r[2] >= it]
    if not before or not after:
        return False
    if any(r[4] for r in after):
        return True
    tail = [r[3] for r in rows[-max(1, len(rows) // 5):]]
    return statistics.median(tail) > sorted(before)[int(0.9 * (len(before) - 1))]


def _spike_row(rows: list, it: int, until: int) -> tuple | None:
    before = _before(rows, it)
    if len(before) < 5:
        return None
    med = statistics.median(before)
    exc = max(abs(x - med) for x in before)
    return next((r for r in rows if r[2] >= it and r[1] <= until and (r[4] or r[3] > med + 2 * exc)), None)


def _step_of(rows: list, it: int) -> int:
    row = next((r for r in rows if r[2] >= it), None)
    return row[0] if row else END


def labels(fault: str, onset: int | None, every: int, shown: dict[str, Any], losses: list[float]) -> dict[str, Any]:
    """`shown`: what the format showed (`writers.Shown.meta`); `losses`: every iteration's loss (the run's truth)."""
    rows, evals = [tuple(r) for r in shown["rows"]], [tuple(e) for e in shown["evals"]]
    truth = [(i, i, i, v, not math.isfinite(v)) for i, v in enumerate(losses)]
    lab: list[dict[str, Any]] = []
    unscored: list[str] = []
    spans: list[dict[str, Any]] = []
    first = _onset_row(rows, onset) if onset is not None else None
    if fault == "nan":
        bad = next((r[0] for r in rows if r[4]), None)
        if bad is None:
            bad = next((e[0] for e in evals if not math.isfinite(e[2])), None)
        if bad is not None:
            lab.append({"type": "nan", "step": bad})
    elif fault in ("lr_jump", "lr_spike") and first is not None:
        diverged = _stayed_up(truth, onset)
        _lr_labels(fault, onset, every, shown, rows, first, diverged, lab, unscored, spans)
    elif fault == "frozen" and first is not None:
        lab.append({"type": "plateau", "step": first[0]})
    elif fault in ("stall", "slowdown") and shown["shows_time"] and first is not None:
        lab.append({"type": "throughput_drop", "step": first[0]})
        spans.append({"type": "throughput_drop", "from": -1, "to": first[0] - 1})
    if fault not in ("stall", "slowdown") or not shown["shows_time"]:
        unscored.append("throughput_drop")
    good = [e for e in evals if math.isfinite(e[2]) and (onset is None or fault not in
                                                         ("nan", "lr_jump", "lr_spike", "frozen") or e[1] < onset)]
    if good:
        best = min(good, key=lambda e: e[2])
        if good[-1][2] >= 1.02 * best[2]:
            lab.append({"type": "overfitting", "step": best[0]})
    if fault == "healthy" and not lab:
        lab.append({"type": "healthy", "step": None})
    for lb in lab:
        lb["confidence"] = "high"
    return {"labels": lab, "unscored": unscored, "unscored_spans": spans}


def _lr_labels(fault: str, onset: int, every: int, shown: dict[str, Any], rows: list, first: tuple, diverged: bool,
               lab: list, unscored: list, spans: list) -> None:
    if fault == "lr_jump" and shown["shows_lr"]:
        lab.append({"type": "lr_schedule", "step": first[0]})
    if fault == "lr_spike":
        unscored.append("lr_schedule")
    end = END if fault == "lr_jump" else _step_of(rows, onset + every + 30)
    if diverged:
        lab.append({"type": "divergence", "step": first[0]})
        bad = next((r[0] for r in rows if r[2] >= onset and r[4]), None)
        if bad is not None:
            lab.append({"type": "nan", "step": bad})
        end = END
    elif fault == "lr_spike":
        spike = _spike_row(rows, onset, onset + every + 10)
        if spike is not None:
            lab.append({"type": "loss_spike", "step": spike[0]})
        else:
            unscored.append("loss_spike")
    for t in ("loss_spike", "grad_explosion"):
        spans.append({"type": t, "from": first[0], "to": end})
