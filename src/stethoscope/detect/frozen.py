"""What an unchanging loss value means: how many digits make a repeat unlikely, when a tiny change is
none (a frozen model's loss still drifts in its last float digits), when a run of repeats is news
(`frozen_trigger`), whether an exact 0 is the print's resolution rather than a loss not computed
(`print_zero`), and the uniform-guess level. Used by `detect.trend`."""

from __future__ import annotations

import math
import re
from itertools import islice
from operator import itemgetter, ne as _ne
from typing import Any

from stethoscope.records import EVAL_LOSS, LOSS

SAME_IN_NOISE = 1e-3
"""A change this many times the record-to-record noise (`stats.diff_sigma`) or less is no change: with its weights
frozen, a model's epoch-average loss still moves in the 6th-7th digit (Adam's momentum running out, float32
sums taken in another order), while a learning run's loss moves by about its noise. On a loss printed at 4
decimals, a merge needs a noise of 0.1 and three records within one printed unit of each other."""
SAME_REL = 1e-5
"""...and at most this fraction of the value (the drift in its 6th digit): after a divergence the noise is huge,
and a loss that wanders by a thousandth of it is still moving."""


_HELD_OUT = re.compile(r"eval|valid|val[/_]|test", re.IGNORECASE)  # not a train loss of the same record
_SIBLING_NAMES: dict[str, bool] = {}  # name -> a train loss beside the loss (`_siblings`)
_NAMES_KEPT = 4096
_second = itemgetter(1)
_isfinite = math.isfinite
_COARSE = 4  # decimals of a print whose last digit a small loss can fall below (`Train Loss: 0.0000`)
_LONG_RECORDS = 50  # a repeat this long, over half the run, with the eval standing still too: a stalled run
_EVALS = 5
_CHANCE = 0.01  # how likely a run of repeated prints may be, by chance, anywhere in the log
_PACE_RECORDS = 8  # records before a repeat that tell the print's pace (`paced`)...
_PACE_TIMES = 3.0  # ...and how many times its usual repeat a repeat may last at that pace


def decimals(v: float) -> int:
    """Decimal places in the shortest repr of `v`: how precisely the log printed it (0.834 -> 3)."""
    text = repr(abs(v)).lower()
    if "e" in text:
        mant, exp = text.split("e")
        return max(0, (len(mant.split(".")[1]) if "." in mant else 0) - int(exp))
    return len(text.split(".")[1]) if "." in text else 0


def repeats_needed(v: float, sigma: float, records: int, minimum: int) -> int:
    """Records in a row showing `v` before the repeat is no coincidence of the print: two successive prints of a
    loss with noise `sigma` (per record) agree by chance with p ~ resolution / (sigma * 2 sqrt(pi)), so k in a row
    somewhere in `records` with about p^(k-1) * records; under `_CHANCE`. A 3-decimal print of a loss with noise
    0.02 needs 4; a full-precision float, `minimum`; a print as coarse as the noise, never."""
    if sigma <= 0 or not math.isfinite(sigma):
        return minimum
    p = min(0.9, 10.0 ** -decimals(v) / (sigma * 3.545))
    if p <= 0:
        return minimum
    return max(minimum, 1 + math.ceil(math.log(_CHANCE / max(records, 1)) / math.log(p)))


def sig_digits(v: float) -> int:
    """Significant digits in the shortest repr of `v` (11.0666 -> 6): how unlikely an exact repeat is."""
    text = repr(abs(v)).lower()
    if "e" in text:
        text = text.split("e")[0]
    digits = text.replace(".", "").lstrip("0")
    return len(digits.rstrip("0")) if "." not in text else len(digits)


def uniform_note(level: float, vocab_size: int | None) -> str | None:
    """'equals ln(V)': the loss of a model that predicts uniformly over the vocabulary."""
    if vocab_size is not None:
        ln_v = math.log(vocab_size)
        if abs(level - ln_v) <= 0.05 * ln_v:
            return f"that is ln(vocab={vocab_size}) = {ln_v:.4g}: uniform predictions, the model outputs nothing learned"
        return None
    if 6.9 <= level <= 12.5:  # ln(1k) .. ln(270k): the range of real vocabularies
        return (f"that equals ln({math.exp(level):,.0f}): the loss of a uniform guess over a vocabulary of "
                "that size, i.e. no learning at all")
    return None


def open_frozen(prev: dict[str, Any] | None, step: int, v: float, step_sigma: float,
                values: dict[str, float], tail: Any = ()) -> dict[str, Any]:
    """A new run of one loss value, starting at `step`, with the sibling losses the record carries beside it and the
    loss's pace before it (`paced`: records per change of its print over `tail`, the (step, loss) records before)."""
    before = prev["value"] if prev is not None else None
    # exactly 0 right from the start, or straight after a real loss: masked labels, not rounding
    abrupt = before is None or abs(before) >= 0.01
    tol = min(SAME_IN_NOISE * step_sigma, SAME_REL * abs(v))  # a change far below both is none
    fz = {"value": v, "start": step, "last": step, "records": 1, "abrupt": abrupt, "tol": tol,
          "siblings": _siblings(values), "before": before}
    e = values.get(EVAL_LOSS)
    if e is not None and math.isfinite(e):
        fz["eval"] = (e, e, 1)
    # runs on every record whose loss moved (the writer thread, every training step): C-level map/filter, not
    # Python generators; the same values, comparisons and count
    old = list(filter(_isfinite, map(_second, tail)))
    if len(old) >= _PACE_RECORDS:  # records per change of the print before it: how long its prints repeat by pace
        fz["pace"] = (len(old) - 1) / max(1, int(sum(map(_ne, old, islice(old, 1, None)))))  # int: numpy bools
    return fz


def paced(fz: dict[str, Any]) -> str | None:
    """Why a repeat of a smooth loss (a running mean) is its print's resolution, or None: before it the print changed
    once every R records (its own repeats), and this repeat lasted under `_PACE_TIMES` x R (bayou: a running mean
    printed to 3 decimals changed every ~9 records over the 32 before `2.684`, held for 12)."""
    per_change = fz.get("pace")
    if not per_change or per_change <= 1 or fz["records"] > _PACE_TIMES * per_change:
        return None
    return (f"its print changed once every {per_change:.3g} records before it: a slow curve repeating at the print's "
            "resolution, not a model that stopped")


def frozen_trigger(fz: dict[str, Any], step: int, v: float, values: dict[str, float], step_sigma: float,
                   n: int, cfg: Any) -> bool:
    """One more record at the run's value: is the run of repeats now news (a frozen loss, masked labels)?"""
    fz["last"] = step
    fz["records"] += 1
    fz["n"] = n + 1  # the run's records so far, this one included
    e = values.get(EVAL_LOSS)
    if e is not None and math.isfinite(e):  # the eval loss over the stretch: did the model change at all?
        lo, hi, k = fz.get("eval", (e, e, 0))
        fz["eval"] = (min(lo, e), max(hi, e), k + 1)
    if v != 0.0 and "moved_sibling" not in fz:  # all printed series frozen, or none: a repeat beside a moving term
        fz["moved_sibling"] = _moved(fz.get("siblings", {}), _siblings(values))
    if v == 0.0:
        sib = _siblings(values)
        if any(k in fz.get("siblings", {}) and x != fz["siblings"][k] for k, x in sib.items()):
            fz["sibling_moved"] = next(k for k, x in sib.items() if x != fz["siblings"].get(k, x))
        return fz["records"] >= 2 and fz["abrupt"]
    digits = sig_digits(v)  # '0.0003' repeating is rounding of a tiny loss, not a frozen one
    need = repeats_needed(v, step_sigma, n, cfg.frozen_min_records)
    long_run = fz["records"] >= need and digits >= 3
    # two records can only speak for a log that holds nothing else: in a long run, two equal
    # values far apart are a coincidence of rounding sooner or later
    whole_log = fz["records"] >= n + 1
    far_apart = whole_log and fz["last"] - fz["start"] >= cfg.frozen_min_steps and digits >= 4
    return long_run or far_apart


def stalled_run(fz: dict[str, Any]) -> str | None:
    """Why a loss printed with few digits that repeats is no chance but a run that stopped changing, or None: the
    repeat has held for at least half of the run's records (and `_LONG_RECORDS`), and the eval loss over that
    stretch stayed within one printed unit (`_EVALS` evals or more). Train and eval both standing still for half
    the run is no rounding coincidence: the compute of that half bought nothing (PaiNN: 367 of 650 epochs at
    0.0136, its eval 0.0222 -> 0.0221, an LR cut to 2e-6 by ReduceLROnPlateau)."""
    n, k = fz.get("n"), fz["records"]
    lo, hi, evals = fz.get("eval", (0.0, 0.0, 0))
    if n is None or k < _LONG_RECORDS or k < 0.5 * n or evals < _EVALS:
        return None
    if hi - lo > 1.5 * 10.0 ** -max(decimals(lo), decimals(hi)):
        return None
    return (f"{k} of the run's {n} records ({k / n:.0%}), and the eval loss stayed within one printed unit over "
            f"them ({lo!r}-{hi!r}, {evals} evals): not a rounding coincidence; the run stopped improving and that "
            "stretch's compute bought nothing")


def eval_moved(fz: dict[str, Any]) -> str | None:
    """Why a repeated train-loss print is a coincidence, or None: the eval loss moved through the repeat by more than
    its print's unit (two evals or more): a model whose weights stand still gives the same eval every time."""
    lo, hi, evals = fz.get("eval", (0.0, 0.0, 0))
    if evals < 2 or hi - lo <= 1.5 * 10.0 ** -max(decimals(lo), decimals(hi)):
        return None
    return f"the eval loss moved through it ({lo!r}-{hi!r} over {evals} evals): the weights changed"


def sibling_moved(fz: dict[str, Any]) -> str | None:
    """Why a repeated train-loss print is a coincidence of the print, or None: another train loss of the same records
    (a component, a sibling objective) moved through it by more than its print's unit, so the weights changed (a
    running mean printed at 3 decimals repeats `2.684` for 12 records while `gen_loss` goes 14.451 -> 14.443)."""
    got = fz.get("moved_sibling")
    if not got:
        return None
    name, a, b = got
    return f"{name} moved through it ({a!r} -> {b!r}): the weights changed"


def _moved(before: dict[str, float], now: dict[str, float]) -> tuple[str, float, float] | None:
    """The first sibling loss that moved from `before` to `now` by more than its print's unit (and its float drift)."""
    for k, x in now.items():
        a = before.get(k)
        if a is not None and abs(x - a) > max(SAME_REL * abs(a), 1.5 * 10.0 ** -max(decimals(a), decimals(x))):
            return k, a, x
    return None


def print_zero(fz: dict[str, Any]) -> str | None:
    """Why a loss printed as exactly 0 is the print's resolution and not a loss that is not computed, or None: in a
    coarse print (`_COARSE` decimals or fewer before the zeros) a sibling loss of the same record kept moving through
    the zeros (the objective is computed; a total of non-negative terms cannot be 0 while one of them is not), or
    the loss left 0 by one or a few printed units (`Train Loss: 0.0000` then `0.0001`: below the print's last digit).
    A loss logged in full (2.3456789 then 0.0) has no such resolution: masked labels."""
    moved, before = fz.get("sibling_moved"), fz.get("before")
    if moved and (before is None or decimals(before) <= _COARSE):  # a float logged in full would show a tiny loss
        return f"{moved} kept moving through them"
    nxt = fz.get("next")
    if nxt is not None and math.isfinite(nxt) and 0 < abs(nxt) <= 10.0 * 10.0 ** -decimals(nxt):
        return f"the loss then moved off 0 by {nxt!r}, a step of the print's last digit"
    return None


def _siblings(values: dict[str, float]) -> dict[str, float]:
    """The other train losses of a record (an L1 beside an MSE, a component of the total), finite ones."""
    names = _SIBLING_NAMES
    if len(names) > _NAMES_KEPT:  # a log with ever-new names: forget, do not grow
        names.clear()
    out = {}
    for k, x in values.items():
        known = names.get(k)
        if known is None:  # the name test once per name, not per record (the writer runs this every step)
            known = names[k] = k != LOSS and "loss" in k.lower() and not _HELD_OUT.search(k)
        if known and isinstance(x, (int, float)) and math.isfinite(x):
            out[k] = x
    return out
