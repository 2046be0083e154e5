"""Overfitting: eval loss rising above its best while the train loss keeps falling.

An eval that rose while the train loss rose too (a jump after an LR change) is the model getting
worse, not overfitting: the search starts afresh from that eval; so it does after an LR raised 3-fold or more in one
record (an LR jump, a warm restart), whose evals are the new LR's doing even where the train loss, still falling
from its fast early descent, hides the jump.

Raised at the `overfit_patience`-th eval after the best one (all of them worse than the best), so
at most `patience` evals after the eval minimum, and it names the best step: the checkpoint to keep.
A rise beyond `overfit_sigma` eval-noise sigmas is a warning; a rise inside the eval noise is an
info ("possible"), and becomes a warning once `patience` evals in a row stand that far above the best.
On a flat stretch the best eval is the lowest of many noisy ones, below the level it stands for by
luck; a rise is measured past that luck too. A later new best withdraws it (same key, info). At the end of the run it reports
evals too sparse to see overfitting at all.

Where the log prints the eval loss as a running mean over `eval_loss_window` evals (mmengine), the evals are
recovered from the means first (`running_mean`): the mean hides a late rise and a frozen model's repeats.
"""

from __future__ import annotations

import math
from typing import Any

from stethoscope.detect.config import DetectConfig
from stethoscope.detect.eval_frozen import EvalFrozen
from stethoscope.detect.overfit_quality import HeldOutQuality
from stethoscope.detect.running_mean import RunningMeanUndo
from stethoscope.detect.stats import StepEma, Window, diff_sigma, lowest_of, shrunk_sigma
from stethoscope.findings.catalogue import EVAL_SPARSE, OVERFITTING
from stethoscope.records import EVAL_LOSS, GRAD_NORM, LOSS, LR, Finding, StepRecord

EVAL_PPL = "eval/ppl"  # the eval perplexity (`detect.names`: eval_ppl, validation perplexity, lm loss validation ppl)

_EVAL_WINDOW = 32
_TRAIN_FALL_REL = 0.01  # the train loss must have fallen at least 1% since the best eval
_COMPETED = 4.0
_LR_RAISED = 3.0  # an LR raised this many times over in one record is a jump or a restart, not a schedule's step
_CHEAP = 0.05  # a rise that gave back at most this share of what the eval learned, and at most this share of the
# best value, costs the run little: the checkpoint of the best step is as good as ever (a plateau's slow drift up,
# early stopping counting): info, not a page; past it the rise is a warning again


class OverfitDetector:
    """Eval loss vs train loss: overfitting with the best step to keep; eval too sparse."""

    name = "overfit"

    def __init__(self, config: DetectConfig | None = None, quality: HeldOutQuality | None = None) -> None:
        self.config = config or DetectConfig()
        self.train = StepEma(self.config.trend_halflife_steps)
        self.evals = Window(_EVAL_WINDOW)
        self._best: dict[str, Any] | None = None
        self._since_best: list[list[float]] = []  # [step, value] of evals after the best, bounded
        self._open: dict[str, Any] | None = None
        self._n_evals = 0
        self._first_step: int | None = None
        self._last_step: int | None = None
        self._last_eval_step: int | None = None
        self._min_train: float | None = None
        self._train_records = 0  # train losses since the last eval
        self._lr: float | None = None  # the last LR logged
        self._eval_high: float | None = None  # the highest eval loss seen: where the eval's learning started
        self.frozen = EvalFrozen()  # weights that stopped changing, seen on the eval loss
        # accuracy, mAP ... at the evals: overconfidence is no overfitting (shared with `TrendDetector`, fed here)
        self.quality = quality if quality is not None else HeldOutQuality()
        window = self.config.eval_loss_window or 1
        self.means = RunningMeanUndo(window) if window > 1 else None  # the evals behind a printed running mean

    def update(self, record: StepRecord) -> list[Finding]:
        step = record.step
        if self._first_step is None:
            self._first_step = step
        back = self._went_back(step)
        self._last_step = step
        t = record.values.get(LOSS)
        if t is not None and math.isfinite(t):
            self.train.update(step, t)
            self._train_records += 1
            self._min_train = t if self._min_train is None else min(self._min_train, t)
        self.quality.push(step, record.values)
        lr = record.values.get(LR)
        if lr is not None:
            if self._lr is not None and 0 < self._lr * _LR_RAISED < lr:
                back = back + self._lr_raised()
            self._lr = lr
            self.frozen.lr(lr)
        self.frozen.grad(step, record.values.get(GRAD_NORM))
        v, err = record.values.get(EVAL_LOSS), 0.0
        if v is not None and self.means is not None:
            v, err = self.means.push(v)
        if v is None:  # a log that gives only the eval perplexity: its log is the eval loss (same trend)
            ppl = record.values.get(EVAL_PPL)
            v = math.log(ppl) if ppl is not None and math.isfinite(ppl) and ppl > 0 else None
        if v is None or not math.isfinite(v):
            return back
        out = back + self._on_eval(step, v)
        stopped = self.frozen.update(step, v, self._lr, err)
        if stopped is None or "moved_again" in stopped.evidence:
            return out if stopped is None else out + [stopped]
        if self.means is not None:
            stopped.message += f" (evals recovered from the log's running mean over {self.means.window} evals)"
            stopped.evidence["eval_loss_window"] = self.means.window
        return out + [stopped] + self._judged_before(stopped)

    def _went_back(self, step: int) -> list[Finding]:
        """The steps went back (a resume from an earlier checkpoint, or another run, a seed, appended to the same
        log from its start): a best eval at or after that step belongs to the branch the run left, so the evals
        from here on are judged against their own best (an incident open on the old branch is closed as it stood).
        A best before the restart is the new session's history too (its checkpoint was resumed past) and stays."""
        best = self._best
        if self._last_step is None or step >= self._last_step or best is None or best["step"] < step:
            return []
        out = self._judge_afresh()
        self.evals = Window(_EVAL_WINDOW)
        self.train = StepEma(self.train.halflife)
        self._min_train = self._eval_high = None
        return out

    def _lr_raised(self) -> list[Finding]:
        """The LR was raised `_LR_RAISED`-fold or more in one record (a jump, a warm restart): the evals after it are
        the new LR's doing (a model knocked back, not one fitting its train set), judged from their own best, as after
        a resume; an incident open before the raise closes as it stood."""
        return self._judge_afresh()

    def _judge_afresh(self) -> list[Finding]:
        """Forget the best eval: the next one is the new best. An open incident is closed as it stood (returned)."""
        out: list[Finding] = []
        if self._open is not None:
            f = self._finding(self._open)
            f.end_step = self._last_eval_step
            out.append(f)
        self._best, self._since_best, self._open = None, [], None
        return out

    def _judged_before(self, stopped: Finding) -> list[Finding]:
        """The weights stopped changing: an open overfitting incident is judged on the evals before the stop only.
        A rise the evals made after it is the optimizer's momentum running out past the eval's minimum (the
        frozen model's value, then repeated), not a model fitting its train set while the eval got worse."""
        inc, stop = self._open, stopped.step
        if inc is None or stop is None:
            return []
        before = [x for x in self._since_best if x[0] < stop]
        if len(before) >= self.config.overfit_patience and \
                before[-1][1] - inc["best"] >= self.config.overfit_min_rel * abs(inc["best"]):
            return []  # it had risen and held before the stop
        self._open = None
        f = self._finding(inc)
        f.severity, f.end_step = "info", stop
        f.message += f"; withdrawn: the evals rose only after the weights stopped changing (around step {stop})"
        f.evidence["withdrawn"] = True
        return [f]

    def finish(self) -> list[Finding]:
        out: list[Finding] = self._late_rise()
        if self._open is not None:
            f = self._finding(self._open)
            f.end_step = self._last_eval_step
            out.append(f)
        sparse = self._sparse_finding()
        if sparse is not None:
            out.append(sparse)
        return out

    def _late_rise(self) -> list[Finding]:
        """The log ended fewer than `overfit_patience` evals after the best, every one of them above it and the last
        beyond its noise while the train loss fell: too few evals to call it overfitting, but the last checkpoint
        is not the best one. Said at info (opened here, it is reported with the incidents still open)."""
        best, since = self._best, self._since_best
        if best is None or self._open is not None or best.get("reported") or not since:
            return []
        if len(since) >= self.config.overfit_patience:
            return []  # judged at the patience-th eval already
        self._maybe_raise(best, int(since[-1][0]), since[-1][1])
        if self._open is not None:
            self._open["severity"] = "info"
            self._open["late"] = True
        return []

    # -- evals ------------------------------------------------------------------------------------
    def _on_eval(self, step: int, v: float) -> list[Finding]:
        if self._last_eval_step is not None and step > self._last_eval_step and self._train_records <= 1:
            # one train loss per eval (an epoch's mean beside the epoch's eval: Keras' CSV, skorch) already
            # averages the span: smoothing it over 50 steps, i.e. 50 epochs, made it lag the whole run
            self.train.halflife = min(self.train.halflife, float(step - self._last_eval_step))
        self._train_records = 0
        self._n_evals += 1
        self._last_eval_step = step
        self._eval_high = v if self._eval_high is None else max(self._eval_high, v)
        self.evals.push(v)
        best = self._best
        if best is None or v <= best["value"]:  # a tie (a print's rounding) is the best again: the gap starts after it
            return self._new_best(step, v)
        if self._open is None and not self._train_better(best):
            # the whole model got worse (a loss jump): not a widening gap; judge afresh from this eval
            self._best = {"value": v, "step": step, "train": self.train.value}
            self._since_best = []
            return []
        self._since_best.append([step, v])
        del self._since_best[: -self.config.overfit_patience * 4]
        if self._open is not None:
            self._open.update(last_step=step, last=v, worst=max(self._open["worst"], v), evals=len(self._since_best))
            if self.train.value is not None:  # the train level beside the eval the message names, not at the opening
                self._open["train_now"] = self.train.value
            return self._escalate(self._open)
        if len(self._since_best) < self.config.overfit_patience or best.get("reported"):
            return []
        return self._maybe_raise(best, step, v)

    def _train_better(self, best: dict[str, Any]) -> bool:
        """Is the train loss (smoothed) still about as low as at the best eval (within `_TRAIN_FALL_REL`)? An
        eval that got worse while the train loss rose too (an LR jump, a bad batch) says the model got worse,
        not that it overfits; a train loss that merely wobbled up by its noise says nothing of the kind."""
        train_now = self.train.value
        return (best["train"] is None or train_now is None
                or train_now <= best["train"] + _TRAIN_FALL_REL * abs(best["train"]))

    def _new_best(self, step: int, v: float) -> list[Finding]:
        out: list[Finding] = []
        inc = self._open
        if inc is not None:
            self._open = None
            f = self._finding(inc)
            f.severity = "info"
            f.end_step = step
            f.message += f"; withdrawn: eval loss reached a new best {v:.4g} at step {step}"
            f.evidence["withdrawn"] = True
            out.append(f)
        self._best = {"value": v, "step": step, "train": self.train.value}
        self._since_best = []
        return out

    def _maybe_raise(self, best: dict[str, Any], step: int, v: float) -> list[Finding]:
        cfg = self.config
        train_now = self.train.value
        if best["train"] is not None and train_now is not None and \
                train_now >= best["train"] - _TRAIN_FALL_REL * abs(best["train"]):
            return []  # train loss not (really) falling: not the overfitting signature
        scale = abs(best["value"]) or 1e-12
        rise = min(x[1] for x in self._since_best) - best["value"]
        if rise < cfg.overfit_min_rel * scale and v - best["value"] < cfg.overfit_min_rel * scale:
            return []
        n = len(self.evals)
        sigma = shrunk_sigma(_eval_noise(self.evals.values()), n, cfg.eval_prior_rel_noise * scale, cfg.prior_weight)
        if v - best["value"] <= sigma:
            return []  # within one sigma of the best: eval noise, not even a possibility worth a note
        worst = max(x[1] for x in self._since_best)
        # the best is the lowest of the evals it beat while they were near it: on a flat stretch luck put it about
        # the largest of as many noise draws under the level it stands for, and a rise is measured past that
        # (on a falling curve the evals before the best were far above it: no luck to allow for)
        before = self.evals.values()[: max(0, len(self.evals) - len(self._since_best))]
        competed = sum(1 for x in before if x <= best["value"] + _COMPETED * sigma)
        luck = lowest_of(competed) * sigma
        significant = (v - best["value"] > cfg.overfit_sigma * sigma + luck
                       and rise > 0.5 * cfg.overfit_sigma * sigma + luck)
        best["reported"] = True
        self._open = {
            "best_step": best["step"], "best": best["value"], "train_best": best["train"], "train_now": train_now,
            "first_step": step, "last_step": step, "last": v, "worst": worst, "evals": len(self._since_best),
            "sigma": sigma, "severity": "warning" if significant else "info",
            # where the evals stood around the best: the median of the last 2 x patience up to it, or the best
            # past its luck (a flat stretch's best is a low draw, not the level the evals after it left)
            # (only the evals that competed with it: on a falling curve the ones before it were far above)
            "before": max(best["value"] + luck, _median([x for x in before[-2 * cfg.overfit_patience:]
                                                         if x <= best["value"] + _COMPETED * sigma] or [0.0])),
        }
        return [self._finding(self._open)]

    def _escalate(self, inc: dict[str, Any]) -> list[Finding]:
        """A possible overfitting (info) whose last `overfit_patience` evals, and the median of the evals
        since the best, stand clear of where the evals stood around the best (past its noise) is one: a
        warning, still naming the best step. An open incident sees many evals: three in a row up by
        chance is no evidence, nor are evals back at the level the lucky best sat under. A climb is: every eval
        since the best higher than the one before, `overfit_patience` + 1 of them or more (1 in 24 by chance,
        judged once per best), ending past the best's noise (a steep descent inflates where the evals 'stood')."""
        since = sorted(x[1] for x in self._since_best)  # the newest evals since the best (up to 4 x patience)
        recent = [x[1] for x in self._since_best[-self.config.overfit_patience:]]
        if inc.get("cheap") and self._given_back(inc) is None:  # its price grew past a small one: now a page
            inc["cheap"] = False
            return [self._finding(inc)]
        if inc["severity"] != "info" or len(recent) < self.config.overfit_patience:
            return []
        bar = inc.get("before", inc["best"]) + self.config.overfit_sigma * inc["sigma"]
        climb = [inc["best"]] + [x[1] for x in self._since_best]
        steady = (len(climb) > self.config.overfit_patience + 1 and all(b > a for a, b in zip(climb, climb[1:]))
                  and climb[-1] > inc["best"] + self.config.overfit_sigma * inc["sigma"])
        if not steady and (min(recent) <= bar or since[len(since) // 2] <= bar):  # the rise holds, not luck
            return []
        inc["severity"] = "warning"
        return [self._finding(inc)]

    def _finding(self, inc: dict[str, Any]) -> Finding:
        rel = (inc["last"] - inc["best"]) / (abs(inc["best"]) or 1e-12)
        msg = (f"eval loss rose from its best {inc['best']:.4g} (step {inc['best_step']}) to {inc['last']:.4g} "
               f"(+{rel:.1%}) over {inc['evals']} evals")
        if inc["train_best"] is not None and inc["train_now"] is not None:
            msg += f" while the train loss (its smoothed level) fell {inc['train_best']:.4g} -> {inc['train_now']:.4g}"
        msg += f": keep the checkpoint of step {inc['best_step']}"
        if inc.get("late"):
            msg += f" (the log ends {inc['evals']} eval(s) after the best: too few to tell overfitting from noise)"
        elif inc["severity"] == "info":
            msg += " (the rise is within the eval noise: possible overfitting)"
        if self.means is not None:
            msg += f" (evals recovered from the log's running mean over {self.means.window} evals)"
        ev = {
            "best_step": inc["best_step"], "best_eval_loss": inc["best"], "eval_loss": inc["last"],
            "worst_eval_loss": inc["worst"], "evals_since_best": inc["evals"], "rise": rel,
            "eval_noise_sigma": inc["sigma"], "train_loss_at_best": inc["train_best"], "train_loss": inc["train_now"],
        }
        severity = inc["severity"]
        given = self._given_back(inc) if severity != "info" and not inc.get("late") else None
        if given is not None:
            severity, inc["cheap"], ev["given_back"] = "info", True, given
            msg += (f"; it gave back {given:.1%} of the {self._eval_high - inc['best']:.4g} the eval loss fell: a small "
                    "price (a plateau drifting up, early stopping's patience running), nothing to act on now")
        better = self.quality.improving_since(inc["best_step"]) if severity != "info" else None
        if better is not None:
            name, value, at = better
            severity, ev["improving"] = "info", name
            msg += (f"; but {name} kept improving (best {value:.4g} at step {at}): the model grows overconfident, "
                    f"not worse on the data it is judged by; judge it by {name}")
        return Finding(OVERFITTING, severity, inc["best_step"], msg, evidence=ev, source=self.name)

    def _given_back(self, inc: dict[str, Any]) -> float | None:
        """The share of the eval's learning (its highest value down to the best) that the rise gave back, when that
        and the rise relative to the best are both at most `_CHEAP`; None for a rise that costs more."""
        high, best, rise = self._eval_high, inc["best"], inc["last"] - inc["best"]
        if high is None or high <= best or rise > _CHEAP * abs(best):
            return None
        share = rise / (high - best)
        return share if share <= _CHEAP else None

    def _sparse_finding(self) -> Finding | None:
        cfg = self.config
        if self._first_step is None or self._last_step is None:
            return None
        span = self._last_step - self._first_step
        if span < cfg.eval_sparse_min_steps or self._n_evals >= cfg.eval_min_count:
            return None
        n = self._n_evals
        evals = "no eval loss" if n == 0 else f"only {n} eval loss{'es' if n > 1 else ''}"
        msg = f"{evals} in {span} steps: too few to see overfitting"
        if self._min_train is not None and self._min_train < 0.05:
            msg += f" (the train loss fell to {self._min_train:.3g}: the model may be memorising)"
        ev = {"evals": self._n_evals, "steps": span, "min_train_loss": self._min_train}
        return Finding(EVAL_SPARSE, "info", self._first_step, msg, end_step=self._last_step,
                       evidence=ev, source=self.name)

    # -- state ------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "train": self.train.state_dict(), "evals": self.evals.state_dict(), "frozen": self.frozen.state_dict(),
            "quality": self.quality.state_dict(),
            "means": None if self.means is None else self.means.state_dict(),
            "scalars": {k: getattr(self, k) for k in _STATE},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.train.load_state_dict(state["train"])
        self.evals.load_state_dict(state["evals"])
        self.frozen.load_state_dict(state.get("frozen", {}))
        self.quality.load_state_dict(state.get("quality", {}))
        if self.means is not None:
            self.means.load_state_dict(state.get("means") or {})
        for k, value in state["scalars"].items():
            if k in _STATE:
                setattr(self, k, value)


_STATE = (
    "_best", "_since_best", "_open", "_n_evals", "_first_step", "_last_step", "_last_eval_step", "_min_train",
    "_train_records", "_lr", "_eval_high",
)


def _eval_noise(values: list[float]) -> float:
    """One eval's noise, free of the curve's trend: from second differences (a line through three evals in a
    row; sigma = median |d2| / (0.6745 sqrt 6)), three evals of one value left out, else from first differences. Evals are
    few and far apart: on a descent, first differences are mostly the descent (a steep one made a 42% rise over
    five evals in a row read as 'within the eval noise')."""
    d2 = sorted(abs(a - 2 * b + c) for a, b, c in zip(values, values[1:], values[2:]) if not a == b == c)
    if len(d2) < 2:  # evals that repeat one value (weights that stopped changing) tell no noise
        return diff_sigma(values, tails=False)
    return d2[len(d2) // 2] / (0.6745 * math.sqrt(6.0))


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]
