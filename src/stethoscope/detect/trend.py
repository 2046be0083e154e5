"""Slow loss dynamics: divergence (sustained or runaway rise), plateau, frozen loss, masked labels.

* divergence - the loss level (median of the last 8 records) stays `divergence_rise_rel` (and 3
  noise sigmas) above its best for `divergence_min_steps` steps, or the raw loss rises on 3 records
  in a row by `runaway_rise_rel` (and 6 sigmas).
  ONE event: a start (where the rise began), an end (when the loss came back, or the last record)
  and how far it came back (fully / partly / not).
* plateau - the loss has not improved by `plateau_max_progress` since the first records, over
  `plateau_min_records` records and `plateau_min_steps` steps (no learning); never judged while the
  LR is still warming up. Or it was falling and stopped at once, for good (`detect.knee`).
* frozen_loss - the same loss value (to 1e-5 of it and a thousandth of its noise) on consecutive records
  (the data or the model is not changing); label_masking when that value is exactly 0 (every label masked out).
Resumes and LR-schedule restarts reset the baselines: a fresh session is compared with itself.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from stethoscope.detect.comeback import came_back, how_far_back, up_to_the_end
from stethoscope.detect.config import DetectConfig
from stethoscope.detect.frozen import frozen_trigger, open_frozen
from stethoscope.detect.knee import STOPPED, KneeTracker, knee_finding
from stethoscope.detect.lr import LrTracker
from stethoscope.detect.stats import RollingMedian, Window, lowest_of, median
from stethoscope.detect.trend_findings import divergence_finding, frozen_finding, plateau_finding, slow_comeback
from stethoscope.detect.trend_rise import left_best, rise_rel
from stethoscope.records import LOSS, LR, Finding, StepRecord

_EDGE = 8  # records whose median is "the start" / "now" of the loss curve
_PLATEAU_EVERY = 4  # the O(edge) plateau check runs on every 4th record
_NOISE_N = 32  # raw losses behind the noise estimate of the divergence checks
_NOISE_REFRESH = 8
_TREND_SIGMA = 3.0  # a sustained rise lifts the median of 8 losses this many of its own sigmas over its best
_MEDIAN_OF_EDGE = 1.2533 / math.sqrt(_EDGE)  # sd of a median of 8 values, in sds of one value
_BEST_MIN = 3  # records before a best level: one first print (a resumed log's single batch) is no level
_PRIOR_REL_NOISE = 0.05  # raw-loss noise assumed (relative) before the noise window has filled


class TrendDetector:
    """Divergence as one event, plateau (no learning), frozen loss and all-labels-masked loss."""

    name = "trend"

    def __init__(self, config: DetectConfig | None = None, lr: LrTracker | None = None) -> None:
        self.config = config or DetectConfig()
        self.lr = lr if lr is not None else LrTracker(self.config)  # shared in a DetectorSet: one update per record
        self.recent = RollingMedian(_EDGE)
        self.noise = Window(_NOISE_N)
        self._last_reset: int | None = None
        self._last_step: int | None = None
        self._fresh()
        self._frozen: dict[str, Any] | None = None
        self._frozen_reported = False
        self._learned: float | None = None  # the lowest loss level of the sessions before a restart
        self._ended_plateaus: list[dict[str, Any]] = []  # plateaus a restart ended (`_learned_after_restart`)

    def _fresh(self) -> None:
        self.recent.clear()
        self.noise.clear()
        self._tail: deque[tuple[int, float]] = deque(maxlen=_NOISE_N)  # (step, raw loss) of the noise window
        self._noise_age = 0
        self._sigma = self._step_sigma = 0.0
        # [lowest median-of-8 loss, its step, raw sigma then, the first step of the 8 records it is the median of]
        self._best: list[float] | None = None
        self._best_from = 0  # records (self._n) when the search for the best began
        self._above_since: int | None = None
        self._above_records = 0
        self._sure_since: int | None = None  # the rise is also above the margin that allows for the best's luck
        self._sure_records = 0
        self._runup: dict[str, Any] | None = None
        self._div: dict[str, Any] | None = None
        self._first: list[float] = []
        self._first_step: int | None = None
        self._n = 0
        self._best_level: float | None = None
        self._plateau: dict[str, Any] | None = None
        self._plateau_done = False
        self._pending: list[float] | None = None  # [step, progress] of the first flat-looking check
        self._knee = KneeTracker()
        self._stop: dict[str, Any] | None = None  # an open stop after a descent (`detect.knee`)
        self._stop_done = False

    # -- entry points -----------------------------------------------------------------------------
    def update(self, record: StepRecord) -> list[Finding]:
        out: list[Finding] = []
        step = record.step
        self.lr.observe(record)
        self._check_reset(step, out)
        v = record.values.get(LOSS)
        if v is None or not math.isfinite(v):
            return out
        self._last_step = step
        out.extend(self._frozen_check(step, v, record.values))
        self._n += 1
        if self._first_step is None:
            self._first_step = step
        if len(self._first) < _EDGE:
            self._first.append(v)
        self.recent.push(v)
        self.noise.push(v)
        self._tail.append((step, v))
        self._noise_age -= 1
        level = self.recent.median()
        out.extend(self._divergence_check(step, v, level))
        if self._n % _PLATEAU_EVERY == 0:
            out.extend(self._plateau_check(step, level))
        sigma = self._raw_sigma()
        self._knee.push(step, min(v, level + 4 * sigma) if sigma > 0 else v, record.values.get(LR))
        if self._knee.due(self._n):
            out.extend(self._stop_check(step, level))
        return out

    def finish(self) -> list[Finding]:
        out: list[Finding] = []
        if self._div is None and self._sure_since is not None and self._above_since is not None and self._best and \
                up_to_the_end(self._sure_records, self._sure_since, self._first_step, self._last_step, self.config):
            self._div = self._open_div(self._above_since, self._best[0], self._last_step, self.recent.median(), "sustained")
        if self._div is not None:
            out.extend(self._div_final(self._div))
        p = self._plateau
        if p is not None and self._last_step is not None:
            f = plateau_finding(p, self.config.vocab_size, self.name)
            f.end_step = self._last_step
            fell = (p["start_level"] - self._best_level) / (abs(p["start_level"]) or 1e-12) if self._best_level else 0
            if fell >= self.config.plateau_max_progress:  # a slow, steady descent got there: learning, not a plateau
                f.severity = "info"
                f.message += f"; but it fell {fell:.0%} by the end ({self._best_level:.4g}): slow learning, not a plateau"
                f.evidence["fell_by_end"] = fell
                f.causes, f.fixes = ["a slow, steady descent"], ["nothing to do; a higher LR may get there sooner"]
            else:
                f.message += f"; still flat at the last record (step {self._last_step})"
            out.append(f)
        if self._frozen is not None and self._frozen_reported:
            out.append(frozen_finding(self._frozen, self.config.vocab_size, self.name))
        out.extend(self._learned_after_restart())
        if self._stop is not None and self._last_step is not None:
            f = knee_finding(self._stop, self._last_step, self.name)
            f.end_step = self._last_step
            f.message += "; still flat at the last record"
            out.append(f)
        return out

    # -- resets -----------------------------------------------------------------------------------
    def _check_reset(self, step: int, out: list[Finding]) -> None:
        reset = self.lr.recent_reset(step)
        if reset is None or reset == self._last_reset:
            return
        self._last_reset = reset
        div = self._div
        if div is not None:
            f = divergence_finding(div, self.name)
            f.end_step = div["last_step"]
            if div["start"] >= reset - self.config.restart_grace_steps:
                f.severity = "info"
                f.message += f"; at a resume/LR-schedule restart (step {reset}): expected, not a divergence"
                f.evidence["expected"] = True
            else:
                f.message += f"; ended by a resume/restart at step {reset}"
            out.append(f)
        if self._plateau is not None:
            f = plateau_finding(self._plateau, self.config.vocab_size, self.name)
            f.end_step = self._last_step
            f.message += f"; ended by a resume/restart at step {reset}"
            out.append(f)
            self._ended_plateaus.append({**self._plateau, "reset": reset, "end": self._last_step})
        if self._best_level is not None:  # what the run had learned before: a session back at it converged
            self._learned = min(self._best_level, self._learned if self._learned is not None else math.inf)
        self._fresh()

    # -- divergence -------------------------------------------------------------------------------
    def _divergence_check(self, step: int, v: float, level: float) -> list[Finding]:
        cfg = self.config
        runaway = self._runup_check(step, v)
        best = self._best
        if (best is None or level < best[0]) and self._n >= _BEST_MIN:
            raw = self.noise.diff_sigma() if len(self.noise) >= _EDGE else _PRIOR_REL_NOISE * abs(level)
            sigma = _MEDIAN_OF_EDGE * raw  # the noise of a median of 8 losses
            if best is None:
                self._best_from = self._n
            self._best = best = [level, step, sigma, self._tail[-min(_EDGE, len(self._tail))][0]]
        if best is None:
            return []
        # the best is the lowest of many noisy medians: below its level by about the largest of as many
        # draws of their noise (measured now); a rise is dated from the plain margin, called sustained only
        # above this one too. The bar: `detect.trend_rise`
        margin = max(rise_rel(cfg, self.lr, best[3] if len(best) > 3 else best[1]) * abs(best[0]), _TREND_SIGMA * best[2])
        luck = lowest_of((self._n - self._best_from) / _EDGE)
        sure = margin + (luck * _MEDIAN_OF_EDGE * self._raw_sigma() if luck and len(self.noise) >= _EDGE else 0.0)
        # a rise starts at a record above the margin whose level (median of 8) is too, and lasts while the
        # level stays there and no record is back at the best level: one low record of a noisy per-step
        # log inside the margin does not restart it
        floor = best[0] if self._above_since is not None else best[0] + margin
        above = level > best[0] + margin and v > floor
        div = self._div
        if div is not None:
            return self._div_progress(div, step, v, level, margin)
        if best[0] <= 0 <= max(self.noise.values()):  # a loss that changes sign (a policy objective centred on
            self._above_since = self._sure_since = None  # 0) has no scale for a rise: no divergence
            return []
        if above:
            if self._above_since is None:
                self._above_since = left_best(self.config, self.lr, self._best, self._tail, step, _MEDIAN_OF_EDGE)
                self._above_records = 0
            self._above_records += 1
            if level > best[0] + sure:
                if self._sure_since is None:
                    self._sure_since, self._sure_records = step, 0
                self._sure_records += 1
            else:
                self._sure_since = None
        else:
            self._above_since = self._sure_since = None
        sustained = (
            self._above_since is not None
            and self._sure_since is not None
            and self._sure_records >= cfg.divergence_min_records
            and step - self._sure_since >= cfg.divergence_min_steps
        )
        if runaway is not None and self._costs_little(v - runaway["base"], min(runaway["base"], best[0])):
            runaway = None  # still rising: judged again at its next record
        if sustained and self._costs_little(level - best[0], best[0]):
            sustained = False
        if runaway is not None:
            self._div = self._open_div(runaway.get("onset", runaway["start"]), runaway["value"], step, v, "runaway")
        elif sustained:
            # the onset is where the loss left its best level for good, not where that best was
            self._div = self._open_div(int(self._above_since), float(best[0]), step, v, "sustained")
            self._div["rel"] = rise_rel(cfg, self.lr, best[3] if len(best) > 3 else best[1])  # the bar it rose over
        else:
            return []
        return [divergence_finding(self._div, self.name)]

    def _costs_little(self, rise: float, best: float) -> bool:
        """Does a rise of `rise` above `best` undo less than `divergence_learned_share` of what the run had learned
        (from its first loss, or the median of its first 3 when that is higher: one low first value is no start,
        down to `best`)? A run that learned nothing has nothing to lose: any rise counts."""
        learned = max(self._first[0], median(self._first[:3])) - best if self._first else 0.0
        return learned > 0 and rise < self.config.divergence_learned_share * learned

    def _raw_sigma(self) -> float:
        """Robust spread of the recent raw losses (MAD): slow wiggles count as noise, not as a rise."""
        if self._noise_age <= 0:
            self._sigma = self.noise.robust_sigma()
            self._step_sigma = self.noise.diff_sigma()  # step-to-step noise, the trend left out
            self._noise_age = _NOISE_REFRESH
        return self._sigma

    def _runup_check(self, step: int, v: float) -> dict[str, Any] | None:
        r = self._runup
        if r is None or v <= r["prev"]:
            # the climb is measured from the recent level, not from where it started: a low outlier
            # followed by noise is no climb
            base = max(v, self.recent.median()) if len(self.recent) else v
            self._runup = {"start": step, "value": v, "base": base, "prev": v, "rises": 0, "biggest": 0.0}
            return None
        r["rises"] += 1
        r["biggest"] = max(r["biggest"], v - r["prev"])
        r["prev"] = v
        if v > r.get("base", r["value"]) + self._sigma:  # the climb's first record beyond the noise of the level it left
            r.setdefault("onset", step)
        if r["rises"] < 3:
            return None
        noise = self._raw_sigma() if len(self.noise) >= _EDGE else 0.0
        total = climb = v - r["base"]  # from the level left, not a low outlier
        # a climb, not one jump at the end of some wiggles (that is a spike's business)
        if climb >= max(self.config.runaway_rise_rel * abs(r["value"]), 6 * noise) and r["biggest"] <= 2 / 3 * total:
            return r
        return None

    def _open_div(self, start: int, base: float, step: int, v: float, kind: str) -> dict[str, Any]:
        cause = self.lr.jump_cause(start, self.config.lead_steps)  # a jump that led the rise, counted from its start
        return {
            "start": start, "base": base, "kind": kind, "peak": v, "peak_step": step,
            "last": v, "last_step": step, "detected": step, "causes": [cause] if cause else [],
        }

    def _div_progress(self, div: dict[str, Any], step: int, v: float, level: float, margin: float) -> list[Finding]:
        div["last"], div["last_step"] = v, step
        if v > div["peak"]:
            div["peak"], div["peak_step"] = v, step
        if level > div["base"] + 0.5 * margin or v > div["base"] + margin:
            return []
        self._div = None
        self._above_since = self._sure_since = None
        self._best = None
        f = divergence_finding(div, self.name)
        f.end_step = step
        f.evidence["recovered"] = "fully"
        return slow_comeback(div, f, level, self.name, self._first_step)

    def _div_final(self, div: dict[str, Any]) -> list[Finding]:
        f = divergence_finding(div, self.name)
        f.end_step = div["last_step"]
        level = self.recent.median() if len(self.recent) else None
        if div["kind"] == "sustained" and came_back(div["base"], level, self.config, div.get("rel")):
            return slow_comeback(div, f, level, self.name, self._first_step)
        how, ev = how_far_back(div["base"], div["peak"], div["peak_step"], div["last"])
        f.message += f"; {how} by the last record (step {div['last_step']}, loss {div['last']:.4g})"
        f.evidence.update(ev)
        return [f]

    def _learned_after_restart(self) -> list[Finding]:
        """Plateaus a restart ended, in a run that ended below them (by `plateau_max_progress` of their level):
        that launch's (an aborted first launch, the next one appended to the same log), not the
        run's: `info`. A run that stayed at the plateau's level after the restart keeps its warning."""
        out = []
        end = self.recent.median() if len(self.recent) else math.inf  # where the run ended: not a lucky low
        for p in self._ended_plateaus:
            if end >= p["level"] - self.config.plateau_max_progress * abs(p["level"]):
                continue
            f = plateau_finding(p, self.config.vocab_size, self.name)
            f.end_step, f.severity = p["end"], "info"
            f.message += (f"; ended by a resume/restart at step {p['reset']}, after which the run learned (to "
                          f"{end:.4g} at its end): that launch's plateau, not the run's")
            out.append(f)
        return out

    # -- plateau ----------------------------------------------------------------------------------
    def _plateau_check(self, step: int, now: float) -> list[Finding]:
        cfg = self.config
        first_step = self._first_step if self._first_step is not None else step
        if self._best_level is None or now < self._best_level:
            self._best_level = now
        start = median(self._first)
        if start == 0.0:  # a loss at 0 from its first records (a tiny one printed as 0): nothing to come down from
            return []
        progress = (start - self._best_level) / (abs(start) or 1e-12)
        p = self._plateau
        if p is not None:
            if progress < 2 * cfg.plateau_max_progress:
                p["last_step"], p["level"] = step, now
                return []
            self._plateau = None
            f = plateau_finding(p, self.config.vocab_size, self.name)
            f.end_step = step
            f.severity = "info"
            f.message += f"; the loss started improving by step {step} ({now:.4g})"
            return [f]
        if self._plateau_done or self._div is not None or self._frozen_reported:
            return []
        if self._n < cfg.plateau_min_records or step - first_step < cfg.plateau_min_steps:
            return []
        if progress >= cfg.plateau_max_progress:
            self._plateau_done = True  # it learned; a late flat stretch is convergence, not a plateau
            return []
        if self._learned is not None and now <= self._learned + cfg.plateau_max_progress * abs(self._learned):
            self._plateau_done = True  # after a restart, back at what the run had learned: converged, not stuck
            return []
        if self.lr.in_warmup(step):
            self._pending = None  # a tiny LR still ramping up: a flat start is expected, judge after warm-up
            return []
        pending = self._pending
        if pending is None:  # a sequential test: still flat half as many steps again later, or no plateau
            self._pending = [step, progress]
            return []
        warmup_end = self.lr.warmup_end_step
        origin = max(first_step, warmup_end) if warmup_end is not None else first_step
        if step - pending[0] < max(cfg.plateau_min_steps / 2, (pending[0] - origin) / 2):
            return []
        rate = (progress - pending[1]) / max(step - pending[0], 1)
        if progress + rate * (step - first_step) >= cfg.plateau_max_progress:
            self._pending = [step, progress]  # learning slowly but for real: look again later
            return []
        self._plateau = {"start": first_step, "start_level": start, "level": now, "last_step": step,
                         "records": self._n, "progress": progress}
        self._plateau_done = True
        return [plateau_finding(self._plateau, self.config.vocab_size, self.name)]

    def _stop_check(self, step: int, now: float) -> list[Finding]:
        """A stop after a healthy descent (`detect.knee`): once; over when the loss improves again."""
        sigma = self._raw_sigma()
        k = self._stop
        if k is not None:
            if now >= k["level"] - max(0.5 * k["fall"], 4 * sigma * _MEDIAN_OF_EDGE, 0.01 * abs(k["level"])):
                return []
            self._stop = None
            f = knee_finding(k, step, self.name)
            f.end_step, f.severity = step, "info"
            again = f"; the loss started improving again by step {step} ({now:.4g})"
            f.message = f.message.replace(f" {STOPPED}", "") + again
            return [f]
        if self._stop_done or self._plateau is not None or self._div is not None or self._frozen_reported:
            return []
        if self.lr.in_warmup(step):
            return []
        cfg = self.config
        k = self._knee.knee(cfg.plateau_min_records, cfg.plateau_min_steps, self.lr.peak)
        if k is None:
            return []
        self._stop, self._stop_done = k, True
        return [knee_finding(k, step, self.name)]

    # -- frozen loss / masked labels --------------------------------------------------------------
    def _frozen_check(self, step: int, v: float, values: dict[str, float]) -> list[Finding]:
        fz = self._frozen
        if fz is None or abs(v - fz["value"]) > fz.get("tol", 0.0):
            if fz is not None and self._frozen_reported:
                self._frozen_reported = False
                fz["next"] = v  # the value it changed to: a step off 0 of one printed unit says the 0 was the print's
                f = frozen_finding(fz, self.config.vocab_size, self.name)
                f.message += f"; the loss changed again at step {step}"
                return [f]
            self._frozen = open_frozen(fz, step, v, self._step_sigma, values, self._tail)
            return []
        trigger = frozen_trigger(fz, step, v, values, self._step_sigma, self._n, self.config)  # counts the record
        if self._frozen_reported or not trigger:
            return []
        self._frozen_reported = True
        return [frozen_finding(fz, self.config.vocab_size, self.name)]

    # -- state ------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "lr": self.lr.state_dict(), "recent": self.recent.state_dict(),
            "noise": self.noise.state_dict(), "knee": self._knee.state_dict(),
            "scalars": {k: getattr(self, k) for k in _STATE},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.lr.load_state_dict(state["lr"])
        self.recent.load_state_dict(state["recent"])
        self.noise.load_state_dict(state["noise"])
        self._knee.load_state_dict(state.get("knee", {}))
        self._noise_age = 0
        for k, value in state["scalars"].items():
            if k in _STATE:
                setattr(self, k, value)


_STATE = (
    "_last_reset", "_last_step", "_best", "_best_from", "_above_since", "_above_records", "_sure_since",
    "_sure_records", "_runup", "_div", "_first", "_first_step", "_learned", "_n", "_best_level", "_plateau",
    "_plateau_done", "_pending", "_frozen", "_frozen_reported", "_stop", "_stop_done", "_ended_plateaus",
)

