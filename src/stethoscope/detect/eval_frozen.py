"""Weights that stopped changing, seen on the eval loss: after a real descent, the eval loss repeats one
value (to its last printed digit, or 1e-5 of it) for `_MIN_SAME` evals and more, while the LR is not ~0; or
the log ends in the optimizer's momentum running out (`_coasting`): each eval moving under beta1^interval of
the move before, in one direction, down to the print's resolution (a stop late in a short run).

A model that learns moves its eval loss from one eval to the next by far more than that; only a model whose
weights no longer change gives the same number on the same validation set again and again (a gradient
hook or scaler that zeroes the gradients, parameters dropped from the optimizer, requires_grad turned off,
an LR of 0 that the log does not show). The train loss of such a run cannot show the stop when it is one
batch's loss: it keeps its batch-to-batch noise, and the last stretch of its descent is within that noise.

When the stop happened. Between the stop and the first of the repeats the eval still moves, less each
time (by under `_TAIL` of the move before: the optimizer's momentum running out), or barely (`_TINY`). The eval before that
shrinking tail is the last that learned; the stop is in the interval it closes, dated by the share of
that interval that still learned: the eval's move over what was expected of it (on a descent, the pace per
step of the fall before it; on a curve that had levelled off, its usual move). A tail
that rose right after that fall carried the weights past the eval's minimum: the stop came within the momentum's
reach before that minimum's eval (`_REACH`). A stop in an interval whose eval
rose (a levelled-off curve) is dated by the tail's own decay (`_stop_by_tail`).

`warning` when the repeated value has at least `_SURE_DIGITS` significant digits (a coincidence is out of
the question); `info` when the log prints fewer (a learning run at its floor can repeat a 4-digit print).
An eval recovered from a printed running mean (`running_mean`) comes with an error bound: it is the
tolerance, and the digits it leaves are the digits that count.
Used by `OverfitDetector`, which already follows the eval loss.
"""

from __future__ import annotations

import math
from typing import Any

from stethoscope.detect.frozen import SAME_REL, decimals, sig_digits
from stethoscope.findings.catalogue import FROZEN_LOSS
from stethoscope.records import Finding

_MIN_SAME = 3  # evals with one value, the last of them included (a value printed with few digits)
_MIN_SAME_SURE = 2  # ...of a value with `_SURE_DIGITS` or more: one exact repeat is no coincidence
_MIN_BEFORE = 3  # evals before the repeats: a descent to compare with
_DESCENT_TOLS = 100.0  # the largest fall before, in tolerances: a real descent, not a flat curve
_TAIL = 0.25  # after the stop, each eval moves under this share of the move before (the momentum running out;
# a converging curve slows down by less than that from one eval to the next)
_TINY = 0.01  # ...or under this share of the largest of the `_RECENT` moves before: it barely moved
_RECENT = 3
_SURE_DIGITS = 6  # a print this precise repeats by chance only when the weights stand still
_SCHEDULE_END = 0.1  # an LR under this share of its peak: the schedule's end (annealing), not a stop
_KEPT = 256  # evals kept (a run evaluates rarely)
_FALLING_UNITS = 1  # a fall the print shows (a unit of its last digit or more), at a pace that holds
_COAST = 0.1  # a momentum tail ending the log: each eval moves under this share of the move before (Adam's beta1
# per step compounds to 0.9^32 = 0.03 over 32 steps); an LR annealed to 0 slows by 1/7 at most (cosine), not 1/10
_BETA1, _SLACK = 0.9, 2.0  # the momentum's decay per step (Adam's and SGD's default), and the margin on it
_COAST_MOVES = 2  # such collapses in a row
_REACH = 0.5 / (1 - _BETA1)  # where a stop before the eval's minimum lies, on average, in steps (see `_finding`)
_COAST_END = 1.5  # print units the tail's last move spans at most (a 0.87 loss to +-1e-5 moved 1.7e-5 in its last 32 steps)
_FLOAT_REL = 1e-6  # two evals of the same weights agree this closely (a float32 mean, summed in another order)
_RESOLVED = 10  # print units the first move of the tail spans: its collapse is seen, not the print's rounding


class EvalFrozen:
    """The evals seen and, once, the finding that the weights stopped changing."""

    def __init__(self) -> None:
        self.evals: list[list[float]] = []  # [step, value, lr or nan, error bound of the value]
        self.peak_lr = 0.0
        self.reported = False
        self.held: Finding | None = None  # the stop reported, while its evals still repeat
        self.zero_grad_since: int | None = None  # the first step of the logged grad norm's current run of exact 0s

    def lr(self, lr: float | None) -> None:
        if lr is not None and math.isfinite(lr) and lr > self.peak_lr:
            self.peak_lr = lr

    def grad(self, step: int, norm: float | None) -> None:
        """A logged grad norm: an exact 0 is the stop itself, seen at the step it happened (no gradient reaches
        the weights), where the evals only bound it by their interval and the momentum's tail."""
        if norm is None or not math.isfinite(norm):
            return
        if norm != 0.0:
            self.zero_grad_since = None
        elif self.zero_grad_since is None:
            self.zero_grad_since = step

    def update(self, step: int, value: float, lr: float | None, err: float = 0.0) -> Finding | None:
        """`err`: the bound of the value's error, where it was recovered from a printed running mean."""
        if self.reported:
            return self._moved_again(step, value)
        self.evals.append([step, value, math.nan if lr is None else lr, err])
        if len(self.evals) > _KEPT:
            del self.evals[: len(self.evals) - _KEPT]
        found = self._check()
        if found is None:
            return None
        self.reported = True
        self.held = found
        return found

    def _moved_again(self, step: int, value: float) -> Finding | None:
        """A stop seen on few evals whose eval loss then moves on: one eval repeated (re-logged, or evaluated
        twice on the same weights), not weights that stood still: the finding is taken back to `info`."""
        f, self.held = self.held, None
        if f is None:
            return None
        ev = f.evidence
        if abs(value - ev["value"]) <= ev["tolerance"] * (2 if ev.get("coasting") else 1):
            self.held = f
            return None
        if ev["evals"] > _MIN_SAME_SURE and not ev.get("coasting"):
            return None  # it stood still long enough to matter, whatever came after
        f.severity, f.end_step = "info", ev["last_same_step"]
        f.message += f"; the eval loss moved again at step {step}: one eval repeated, not weights that stood still"
        ev["moved_again"] = step
        return f

    def _check(self) -> Finding | None:
        ev = self.evals
        if len(ev) < 2 + _MIN_BEFORE:
            return None
        last = ev[-1][1]
        # a log prints every eval in one format: its precision is the most decimals an eval showed ("1.000"
        # reads back as 1.0, one decimal: a tolerance of 0.05 merged a 0.999 before it into the repeats)
        printed = 0.5 * 10.0 ** -max(decimals(e[1]) for e in ev)
        tol = max(SAME_REL * abs(last), printed, *(_err(e) for e in ev[-2:]))
        k0 = len(ev) - 1  # the first of the repeats at the end
        while k0 > 0 and abs(ev[k0 - 1][1] - last) <= tol:
            k0 -= 1
        needed = _MIN_SAME_SURE if _digits(last, _err(ev[-1])) >= _SURE_DIGITS else _MIN_SAME
        if needed < _MIN_SAME and len(ev) - k0 < _MIN_SAME and not _repeat_is_news(ev, k0, tol):
            needed = _MIN_SAME  # one near-repeat straight after a full-size move: a coincidence of a learning run
        coast = None
        if len(ev) - k0 < needed:
            coast = _coasting(ev, 2 * tol)
            if coast is None:
                return None
            k0 = coast
        if k0 < _MIN_BEFORE:
            return None
        if _still_falling(ev[k0 - 1:], printed, _digits(last, _err(ev[-1]))):
            return None
        lr = ev[k0][2]
        if math.isfinite(lr) and (lr <= 0.0 or (self.peak_lr > 0 and lr < _SCHEDULE_END * self.peak_lr)):
            return None  # the LR is (nearly) 0: the schedule ended, the weights may well stand still
        moves = [ev[i - 1][1] - ev[i][1] for i in range(1, k0 + 1)]  # moves[i - 1]: the fall into eval i
        if max(moves) < _DESCENT_TOLS * tol:
            return None  # no descent before: a flat curve printed at low precision
        j = k0  # back over the momentum's tail to the last eval that still learned
        while j > 1 and _in_tail(moves, j - 1, k0):
            j -= 1
            if moves[j] < -2 * _RESOLVED * tol and moves[j - 1] > 0:
                break  # the tail rose past the eval's minimum: the fall before it learned (momentum keeps its way)
        past_min = j < k0 and moves[j] < -2 * _RESOLVED * tol and moves[j - 1] > 0
        scale = sorted(abs(m) for m in moves[:j])[j // 2]  # how far an eval moved while learning
        return self._finding(ev, moves, j, k0, tol, scale, coast is not None, past_min)

    def _finding(self, ev: list[list[float]], moves: list[float], j: int, k0: int, tol: float,
                 scale: float, coasting: bool = False, past_min: bool = False) -> Finding:
        onset = _stop_in(ev, moves, j, scale)
        zero = self.zero_grad_since  # the grad norm is 0 since then, up to the repeats: that is when it stopped
        if zero is not None and ev[0][0] < zero <= ev[k0][0]:
            onset, past_min = zero, False
        if past_min:  # the tail rose past the eval's minimum: the momentum carried the weights past it, so the stop
            # came within the momentum's reach (1 / (1 - beta1) steps) before that eval: half of it on average. (The
            # rule before put it 2/3 into the interval, 11 steps before a 32-step eval: 66 of 110 stops dated
            # within +-2 logged steps on the real-trainer runs, 74 now)
            onset = max(onset, int(round(ev[j][0] - min(_REACH, ev[j][0] - ev[j - 1][0] - 1))))
        elif onset != zero and j < len(moves) and moves[j - 1] < 0:
            onset = _stop_by_tail(ev, moves, j)
        value, n = ev[-1][1], len(ev) - k0
        digits = _digits(value, _err(ev[-1]))
        sure = digits >= _SURE_DIGITS
        shown = f"{value:.{max(digits, 1)}g}" if _err(ev[-1]) else repr(value)  # a recovered value: its digits only
        if coasting:
            tail = ", ".join(f"{abs(b[1] - a[1]):.3g}" for a, b in zip(ev[k0 - 1:], ev[k0:]))
            seen = (f"the eval loss moved by {abs(ev[k0 - 1][1] - ev[k0 - 2][1]):.3g}, then {tail} up to step "
                    f"{int(ev[-1][0])} ({shown}): each move under 1/{round(1 / _COAST)} of the one before, the "
                    "optimizer's momentum running out with no gradient left")
        else:
            seen = f"the eval loss is {shown} (to +-{tol:.1g}) at all {n} evals from step {int(ev[k0][0])} to {int(ev[-1][0])}"
        msg = (f"the weights stopped changing around step {onset}: {seen}, after falling "
               f"{ev[0][1]:.4g} -> {ev[j][1]:.4g} by step {int(ev[j][0])}; a model that learns moves its eval "
               "loss more than that. Check that the gradients reach the optimizer (a hook or scaler zeroing "
               "them, requires_grad off, parameters missing from the optimizer) and that the LR is not 0")
        if not sure and _err(ev[-1]):
            msg += f" (the evals are known to {digits} significant digits: a run at its floor can repeat them)"
        elif not sure:
            msg += f" (the log prints {digits} significant digits: a run at its floor can repeat them)"
        evidence: dict[str, Any] = {"series": "eval/loss", "value": value, "evals": n, "first_same_step":
                                    int(ev[k0][0]), "last_learning_eval": int(ev[j][0]), "digits": digits,
                                    "tolerance": tol, "last_same_step": int(ev[-1][0])}
        if coasting:
            evidence["coasting"] = True
        if onset == zero:
            msg = msg.replace(f"around step {onset}: ", f"at step {onset} (the grad norm is 0 from there on): ", 1)
            evidence["zero_grad_step"] = zero
        return Finding(FROZEN_LOSS, "warning" if sure else "info", onset, msg, end_step=int(ev[-1][0]),
                       evidence=evidence, source="overfit")

    def state_dict(self) -> dict[str, Any]:
        return {"evals": [list(e) for e in self.evals], "peak_lr": self.peak_lr, "reported": self.reported,
                "zero_grad_since": self.zero_grad_since}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.evals = [list(e) for e in state.get("evals", [])]
        self.peak_lr = state.get("peak_lr", 0.0)
        self.reported = state.get("reported", False)
        self.zero_grad_since = state.get("zero_grad_since")


def _repeat_is_news(ev: list[list[float]], k0: int, tol: float) -> bool:
    """Is one repeat of a precise value (two evals) the weights standing still? When the two agree to the float's
    own noise (`_FLOAT_REL`: the same weights, the sum taken in another order), or the repeat ends a momentum tail
    (the move into it under `_COAST` of the move before). A learning run's eval moves by ~1e-3 per eval, and over
    many evals and runs one move lands within the `SAME_REL` tolerance now and then (a Lightning run: 0.8666892 ->
    0.8666939 after moving 0.0025 and 0.0036); weights that stop either stop dead (requires_grad off, parameters
    out of the optimizer: a float-exact repeat) or coast on the optimizer's momentum, each move a small share of
    the one before."""
    a, b = ev[-2][1], ev[-1][1]
    if abs(b - a) <= max(_FLOAT_REL * abs(b), _err(ev[-1]), _err(ev[-2])):
        return True
    if k0 < 2:
        return False
    into, before = abs(ev[k0][1] - ev[k0 - 1][1]), abs(ev[k0 - 1][1] - ev[k0 - 2][1])
    return into <= _COAST * before + tol


def _stop_by_tail(ev: list[list[float]], moves: list[float], j: int) -> int:
    """The stop inside the interval ending at eval j when eval j ROSE (the eval was no longer falling: a levelled-off
    or overfitting curve, whose move says nothing of how much of the interval still learned), from the momentum's
    tail: after a stop x steps into the interval, the weights coast on a step shrinking by beta1 per step, so the
    move into eval j holds the coast's first part, 1 - b^(D - x), and the move after it the rest up to the next
    eval, b^(D - x) * (1 - b^D2). Their ratio gives D - x. (Keras stops at an epoch's start: its console was dated
    at the epoch's end, 32 steps late; 7 of 22 such stops dated within +-2 logged steps, 13 now)"""
    start, end = ev[j - 1][0], ev[j][0]
    rho = abs(moves[j]) / abs(moves[j - 1])
    y = rho / (rho + 1.0 - _BETA1 ** max(1.0, ev[j + 1][0] - end))
    back = math.log(y) / math.log(_BETA1) if 0.0 < y < 1.0 else 0.0
    return int(round(max(start + 1, end - back)))  # the eval at `start` saw the weights learn up to it


def _in_tail(moves: list[float], i: int, k0: int) -> bool:
    """Is moves[i] (the fall into eval i + 1) part of the momentum's tail after the stop? When it barely moved
    (`_TINY` of the largest of the `_RECENT` moves before it); when it is under `_TAIL` of the move the curve would have made still
    learning (the move before, slowed by the curve's own deceleration: a descent that slows from one eval to the
    next would otherwise read as a stop); or when it is a rise right after a fall and the move after it shrank
    to under `_TAIL` of it: the momentum carrying the weights past the eval's minimum, then running out."""
    here, before = abs(moves[i]), abs(moves[i - 1])
    if here <= _TINY * max(abs(m) for m in moves[max(0, i - _RECENT):i]):  # of the learning just before, not
        return True  # the untrained start's first fall (x100 a late move: every late move read as "barely")
    slowing = min(1.0, before / abs(moves[i - 2])) if i >= 2 and moves[i - 2] else 1.0
    if here <= _TAIL * before * slowing:
        return True
    after = abs(moves[i + 1]) if i + 1 < k0 else 0.0
    return moves[i] < 0 < moves[i - 1] and after <= _TAIL * here


def _still_falling(pts: list[list[float]], printed: float, digits: int) -> bool:
    """The eval before the repeats and the repeats ("the same" to the tolerance), yet printed falling by
    `_FALLING_UNITS` units of the last printed digit in all, at a pace per step that holds (no move under `_TAIL` of
    the one before, per step: evals a step or two apart near the end move little per eval): still learning, slowly
    (an LR annealing to the schedule's end), not a stop, whose momentum tail collapses from one eval to the next.
    A last repeat of one value is the print's resolution when it has at most `_SURE_DIGITS` digits."""
    same = [p[1] for p in pts[1:]]
    if round((same[0] - same[-1]) / (2 * printed)) < _FALLING_UNITS:
        return False
    rates = [(a[1] - b[1]) / max(1.0, b[0] - a[0]) for a, b in zip(pts, pts[1:])]
    if rates[-1] == 0 and digits <= _SURE_DIGITS:
        rates.pop()
    return all(r > 0 for r in rates) and all(b >= _TAIL * a for a, b in zip(rates, rates[1:]))


def _coasting(ev: list[list[float]], unit: float) -> int | None:
    """The first eval of a momentum tail that ends the log, or None. With the gradients gone, Adam or SGD with
    momentum still moves the weights by a step that shrinks by beta1 each step: each eval then moves, in the one
    direction, under `_shrink` of the move before (up to a print `unit` of rounding), `_COAST_MOVES` times in a
    row or more, after a move of `_RESOLVED` units or more that the collapse is measured against, down to a last
    move at the print's resolution (`_COAST_END` units). The eval loss of a model that still learns moves by its
    noise from one eval to the next, and an LR annealed to 0 slows it by 1/7 at most from one interval to the
    next (the last interval of a cosine against the one before)."""
    moves = [b[1] - a[1] for a, b in zip(ev, ev[1:])]  # moves[i]: into eval i + 1
    k = len(moves)
    while k > 1 and abs(moves[k - 1]) <= _shrink(ev[k][0] - ev[k - 1][0]) * abs(moves[k - 2]) + unit:
        k -= 1  # moves[k - 1] collapsed against the one before it
    big = moves[k - 1] if k > 0 else 0.0
    tail = moves[k:]
    if len(tail) < _COAST_MOVES or abs(big) < _RESOLVED * unit or abs(tail[-1]) > _COAST_END * unit:
        return None  # the tail ends at the print's resolution: a loss converging fast to its floor also moves
        # less and less, then goes on moving by its noise
    if any(m * big < 0 for m in tail if abs(m) > unit):
        return None  # momentum keeps its direction: a move back is the noise of a run that still learns
    return k + 1


def _shrink(steps: float) -> float:
    """The most a momentum tail's move keeps of the move before over `steps` steps: beta1^steps with the usual
    beta1 (`_BETA1`, Adam's and SGD's default), with `_SLACK` for the interval that still learned in part; at most
    `_COAST`. Over 32 steps 0.07: a descent that slows to 1/11 into its floor is no tail."""
    return min(_COAST, _SLACK * _BETA1 ** max(steps, 1.0))


def _err(e: list[float]) -> float:
    return e[3] if len(e) > 3 else 0.0


def _digits(value: float, err: float) -> int:
    """Significant digits of a value: as printed, or as far as its error bound leaves them."""
    if err <= 0:
        return sig_digits(value)
    return max(0, int(math.floor(math.log10(abs(value) / err)))) if value else 0


def _stop_in(ev: list[list[float]], moves: list[float], j: int, scale: float) -> int:
    """The step the weights stopped, inside the interval that ends at eval j, the last eval that moved like
    the learning before it: the share of the interval that still learned is eval j's move over what was
    expected of it (on a descent, the fall before it per step, over this interval's steps: a deceleration read
    off two noisy moves only ever shrank it and dated stops late; on a curve that had levelled off and
    wandered, its usual move)."""
    start, end = ev[j - 1][0], ev[j][0]
    expected = scale
    if j >= 2 and moves[j - 1] > 0 and moves[j - 2] > 0:  # the pace of the fall before, per step, over this interval
        expected = moves[j - 2] / max(1.0, ev[j - 1][0] - ev[j - 2][0]) * (end - start)
    if expected <= 0:
        return int(end)
    share = min(1.0, abs(moves[j - 1]) / expected)
    return int(round(start + share * (end - start)))
