"""Learning-rate schedule: warm-up end, decay start, jumps, restarts on resume, LR stuck at 0.

`LrTracker` is the O(1) schedule model other detectors consult ("LR still in warm-up and
rising", "spike right after warm-up ended", "loss jump at a schedule restart"); `LrDetector` turns
its events into `lr_schedule` findings. Schedule milestones and deliberate resets are `info`: they
are facts, not faults. Only an LR stuck at 0 (nothing learns) is a warning.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from stethoscope.detect.config import DetectConfig
from stethoscope.detect.stats import diff_sigma, is_finite, median
from stethoscope.findings.catalogue import LR_SCHEDULE, PLATEAU
from stethoscope.records import LOSS, LR, Finding, StepRecord

_LOSSES_KEPT = 16
_FLAT_RECORDS = 5  # records at the peak before a flat LR counts as "warm-up over" / WSD stable phase
_JUMP_VS_SLOPE = 10.0
_RESTART_MAX = 2.0  # a restarted schedule peaks near the old one; an LR far above every earlier one is an override  # a jump moves the LR this many times further than the schedule's recent slope


@dataclass(slots=True)
class LrEvent:
    kind: str  # warmup_end | decay_start | jump | restart | resume | zero_stuck
    step: int
    before: float | None
    after: float | None


def _steps(n: int) -> str:
    return "1 step" if n == 1 else f"{n} steps"


class LrTracker:
    """A running model of the LR schedule. `update` returns the schedule events a record completes."""

    def __init__(self, config: DetectConfig) -> None:
        self.config = config
        self.prev_step: int | None = None
        self.seen_step: int | None = None  # the last record's step, with an LR or without (`note_step`)
        self.prev_lr: float | None = None
        self.peak = 0.0
        self.top = 0.0  # the highest LR of the run so far, across restarts
        self.peak_step: int | None = None
        self.start_lr: float | None = None
        self.session_n = 0
        self.since_jump = 0  # records since the last jump: the schedule's pace is re-learned after one
        self.rises = 0
        self.flat = 0
        self.rising = False
        self.warmup_end_step: int | None = None
        self.warmup_peak: float | None = None  # the LR at the end of warm-up
        self.decay_step: int | None = None
        self.slope = 0.0  # EMA of |dLR| per step, the schedule's own pace
        self.n = 0
        self.zero_run = 0
        self.zero_abrupt = False
        self.ever_positive = False
        self.zero_reported = False
        self.last_restart_step: int | None = None
        self.last_resume_step: int | None = None
        self.last_jump: list[float] | None = None  # [step, before, after] of the latest off-schedule jump
        self.zero_start: int | None = None
        self._seen: StepRecord | None = None
        self._events: list[LrEvent] = []

    def observe(self, record: StepRecord) -> list[LrEvent]:
        """Update from one record, once: detectors that share this tracker all call it with the same
        record; the first call does the work, the others get the same events back."""
        if record is self._seen:
            return self._events
        self._seen = record
        lr = record.values.get(LR)
        if lr is None or not is_finite(lr):
            self.note_step(record.step)
            self._events = []
        else:
            self._events = self.update(record.step, lr)
        return self._events

    def note_step(self, step: int) -> bool:
        """Track steps of records without an LR; True when the steps went backwards (a resume, or a second run
        appended to the log: its first spike is the new run's start, not an instability)."""
        last, self.seen_step = self.seen_step, step
        resumed = last is not None and step < last
        if resumed:
            self.last_resume_step = step
        return resumed

    def update(self, step: int, lr: float) -> list[LrEvent]:
        events: list[LrEvent] = []
        self.seen_step = step
        if self.prev_step is not None and step <= self.prev_step:
            self.last_resume_step = step
            events.append(LrEvent("resume", step, self.prev_lr, lr))
            self._new_session(step, lr)
            self.prev_step, self.prev_lr = step, lr
            return events
        p = self.prev_lr
        self.n += 1
        self.session_n += 1
        self.since_jump += 1
        if p is None:
            self._new_session(step, lr)
        else:
            events.extend(self._compare(step, p, lr))
        self._track_zero(step, p, lr, events)
        self.top = max(self.top, lr)
        self.prev_step, self.prev_lr = step, lr
        return events

    def in_warmup(self, step: int) -> bool:
        """True while the LR is still rising in warm-up (or before a configured warm-up length)."""
        if self.config.warmup_steps is not None:
            return step < self.config.warmup_steps
        return self.rising and self.warmup_end_step is None

    def jump_cause(self, step: int, within: int) -> str | None:
        """'LR jumped a -> b at step s', when an upward off-schedule LR jump happened within `within` steps."""
        j = self.last_jump
        if j is None or not 0 <= step - j[0] <= within or j[2] <= j[1]:
            return None
        factor = f"x{j[2] / j[1]:.3g}" if j[1] > 0 else "up from 0"
        return f"LR jumped {j[1]:.4g} -> {j[2]:.4g} ({factor}) at step {int(j[0])}, {_steps(step - int(j[0]))} before: LR too high"

    def since_warmup_end(self, step: int) -> int | None:
        if self.warmup_end_step is None:
            return None
        return step - self.warmup_end_step

    def recent_reset(self, step: int) -> int | None:
        """The step of a resume or schedule restart within restart_grace_steps before `step`."""
        grace = self.config.restart_grace_steps
        for s in (self.last_restart_step, self.last_resume_step):
            if s is not None and 0 <= step - s <= grace:
                return s
        return None

    # -- internals --------------------------------------------------------------------------------
    def _new_session(self, step: int, lr: float) -> None:
        self.peak = lr
        self.peak_step = step
        self.start_lr = lr
        self.session_n = 0
        self.rises = 0
        self.flat = 0
        self.rising = False
        self.warmup_end_step = None
        self.warmup_peak = None
        self.decay_step = None

    def _compare(self, step: int, p: float, c: float) -> list[LrEvent]:
        gap = max(step - (self.prev_step or step), 1)
        delta = c - p
        peak = max(self.peak, p, c)
        expected = self.slope * gap
        is_jump = (
            self.session_n >= 3
            and self.since_jump >= 3
            and abs(delta) >= self.config.lr_jump_rel * peak
            and abs(delta) > _JUMP_VS_SLOPE * expected
        )
        before = max(self.top, p)  # the run's LR scale before this value (every session's peak)
        # a fresh schedule's first step: up from (near) zero, back to the old schedule's scale, not far above it
        restart = p <= self.config.lr_jump_rel * before and c <= _RESTART_MAX * before
        if is_jump and delta > 0 and restart and self.ever_positive:
            start = self.prev_step if p == 0 and self.prev_step is not None else step
            self.last_restart_step = start
            self._new_session(step, c)
            self.slope = 0.0
            return [LrEvent("restart", start, p, c)]
        events = [LrEvent("jump", step, p, c)] if is_jump else []
        if is_jump:
            self.last_jump = [step, p, c]
            self.since_jump = 0  # the LR now lives at another scale: learn its pace again
        else:
            pace = abs(delta) / gap
            relearn = self.session_n <= 2 or self.since_jump <= 2
            self.slope = pace if relearn else 0.8 * self.slope + 0.2 * pace
        events.extend(self._phase(step, p, c, is_jump))
        return events

    def _phase(self, step: int, p: float, c: float, is_jump: bool) -> list[LrEvent]:
        events: list[LrEvent] = []
        if c > p:
            if not is_jump:
                self.rises += 1
                self.rising = True
            self.flat = 0
            if c >= self.peak:
                self.peak, self.peak_step = c, step
            return events
        self.rising = False
        if c == p:
            self.flat += 1
            if self.rises and self.warmup_end_step is None and self.flat >= _FLAT_RECORDS:
                events.append(self._warmup_end())
            return events
        if self.rises and self.warmup_end_step is None:
            events.append(self._warmup_end())
        if self.rises and self.decay_step is None and self.flat >= _FLAT_RECORDS and p >= self.peak and not is_jump:
            self.decay_step = self.prev_step
            events.append(LrEvent("decay_start", self.prev_step or step, p, c))
        self.flat = 0
        return events

    def _warmup_end(self) -> LrEvent:
        self.warmup_end_step = self.peak_step
        self.warmup_peak = self.peak  # the schedule's peak; a later jump raises `peak`, not this
        return LrEvent("warmup_end", self.peak_step or 0, self.start_lr, self.peak)

    def _track_zero(self, step: int, p: float | None, c: float, events: list[LrEvent]) -> None:
        if c != 0.0:
            self.ever_positive = True
            self.zero_run = 0
            self.zero_reported = False
            return
        if self.zero_run == 0:
            self.zero_start = step
            self.zero_abrupt = p is not None and p > 0 and p >= self.config.lr_jump_rel * self.peak
        self.zero_run += 1
        long_enough = self.zero_run >= self.config.lr_zero_records and self.zero_run >= 0.1 * self.n
        if long_enough and not self.zero_reported and (not self.ever_positive or self.zero_abrupt):
            self.zero_reported = True
            events.append(LrEvent("zero_stuck", step - 0, p, c))

    def state_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in _TRACKER_FIELDS}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for k in _TRACKER_FIELDS:
            if k in state:
                setattr(self, k, state[k])


_TRACKER_FIELDS = (
    "prev_step", "prev_lr", "peak", "peak_step", "start_lr", "session_n", "since_jump", "rises", "flat", "rising",
    "warmup_end_step", "warmup_peak", "decay_step", "slope", "n", "zero_run", "zero_abrupt", "ever_positive",
    "zero_reported", "last_restart_step", "last_resume_step", "last_jump", "zero_start", "top", "seen_step",
)


class LrDetector:
    """LR schedule findings: warm-up end, decay start, jumps, restarts, and an LR stuck at 0, which the
    user sees as a loss that stops moving: that is reported as the `plateau` it causes, from the first
    step at 0, with the LR as its named cause (an `lr_schedule` warning only when the loss is not
    logged, or kept improving so the logged LR cannot be the whole story)."""

    name = "lr"

    def __init__(self, config: DetectConfig | None = None, tracker: LrTracker | None = None) -> None:
        self.config = config or DetectConfig()
        self.tracker = tracker if tracker is not None else LrTracker(self.config)
        self._before: list[float] = []  # the last losses before the LR reached 0
        self._at_zero: list[float] = []  # losses since (the last _LOSSES_KEPT)
        self._first_at_zero: list[float] = []  # the first _LOSSES_KEPT of them
        self._lr_before: float | None = None  # the last LR above 0
        self._plateau: Finding | None = None  # the open LR-at-0 plateau, closed by `finish`

    def update(self, record: StepRecord) -> list[Finding]:
        events = self.tracker.observe(record)
        self._track_loss(record)
        return [self._finding(e) for e in events] if events else []

    def finish(self) -> list[Finding]:
        f, self._plateau = self._plateau, None
        if f is None or self.tracker.zero_run == 0 or self.tracker.prev_step is None:
            return []
        f.end_step = self.tracker.prev_step
        f.message += f"; still at LR 0 at the last record (step {f.end_step})"
        return [f]

    def _track_loss(self, record: StepRecord) -> None:
        lr = record.values.get(LR)
        if lr is not None and is_finite(lr) and lr > 0:
            self._lr_before = lr
            self._plateau = None
        v = record.values.get(LOSS)
        if v is None or not is_finite(v):
            return
        at_zero = self.tracker.zero_run > 0 and self.tracker.prev_step == record.step
        if not at_zero:
            self._at_zero, self._first_at_zero = [], []
            self._before = (self._before + [v])[-_LOSSES_KEPT:]
        else:
            self._at_zero = (self._at_zero + [v])[-_LOSSES_KEPT:]
            if len(self._first_at_zero) < _LOSSES_KEPT:
                self._first_at_zero.append(v)

    def _zero_finding(self, e: LrEvent) -> Finding:
        zero_start = self.tracker.zero_start
        step = zero_start if zero_start is not None else e.step
        ev: dict[str, Any] = {"zero_since": zero_start, "records_at_zero": self.tracker.zero_run}
        lr_note = f"LR has been exactly 0 since step {step}: the weights are not being updated"
        if not self.tracker.ever_positive and self._falls_at_zero():
            first, now = median(self._first_at_zero[:8]), median(self._at_zero[-8:])
            return self._make(step, "info", f"the LR reads 0 from the first record (step {step}), yet the loss falls "
                              f"({first:.4g} -> {now:.4g}): the weights are being updated, at an LR the log prints "
                              "too coarsely (a fixed 0.0000) or in a param group it does not show", ev, e.step)
        if len(self._before) < 3 or len(self._at_zero) < 3:
            return self._make(step, "warning", lr_note, ev, e.step)
        before, now = median(self._before[-8:]), median(self._at_zero[-8:])
        progress = (before - now) / (abs(before) or 1e-12)
        ev.update(loss_before=before, loss_now=now, progress=progress, lr_before=self._lr_before)
        # the difference of two medians of 8 noisy losses: an "improvement" inside 3 of its sigmas is noise
        sigma = diff_sigma(self._before[-16:] + self._at_zero[-16:])  # from neighbours: a trend is no noise
        noise = 3 * 1.2533 * sigma * math.sqrt(2 / 8)
        if progress >= self.config.plateau_max_progress / 2 and before - now > noise:
            return self._make(step, "warning", lr_note + f", yet the loss still improves ({before:.4g} -> {now:.4g}): "
                              "is the logged LR only one of several param groups?", ev, e.step)
        msg = (f"loss stopped improving at step {step} ({before:.4g} -> {now:.4g} over {e.step - step} steps): the LR "
               f"has been exactly 0 since step {step}")
        cause = (f"LR went to 0 at step {step} (from {_fmt(self._lr_before)}): a scheduler that decays to 0 too "
                 "early, or a resume that restored a finished schedule")
        self._plateau = Finding(PLATEAU, "warning", step, msg, end_step=e.step, evidence={**ev, "lr_zero": True},
                                causes=[cause], source=self.name)
        return self._plateau

    def _finding(self, e: LrEvent) -> Finding:
        before, after = e.before, e.after
        ev: dict[str, Any] = {"lr_before": before, "lr_after": after}
        if e.kind == "warmup_end":
            ev = {"lr_start": before, "lr_peak": after}
            return self._make(e.step, "info", f"LR warm-up ended at step {e.step} (peak LR {_fmt(after)})", ev)
        if e.kind == "decay_start":
            return self._make(e.step, "info", f"LR decay started after step {e.step} ({_fmt(before)} -> {_fmt(after)})", ev)
        if e.kind == "restart":
            msg = (f"LR schedule restarted at step {e.step} ({_fmt(before)} -> {_fmt(after)}): "
                   "a resume with a fresh schedule; loss jumps right after it are expected")
            return self._make(e.step, "info", msg, {**ev, "reset": True})
        if e.kind == "resume":
            return self._make(e.step, "info", f"steps went back to {e.step}: the run was resumed", {**ev, "reset": True})
        if e.kind == "jump":
            rel = (after - before) / before if before else float("inf")
            ev["relative_change"] = rel
            msg = (f"LR jumped {_fmt(before)} -> {_fmt(after)} ({rel:+.1%}) at step {e.step}, off the "
                   "schedule's slope: an LR override or scheduler change on resume?")
            return self._make(e.step, "info", msg, ev)
        return self._zero_finding(e)

    def _falls_at_zero(self) -> bool:
        """Has the loss fallen since the LR read 0, beyond 3 sigmas of its noise (the first 8 losses at 0
        against the last 8, apart)? At an LR of exactly 0 it only wanders."""
        first, last = self._first_at_zero[:8], self._at_zero[-8:]
        if len(first) < 8 or len(self._first_at_zero) + len(self._at_zero) < 24:
            return False
        noise = 3 * 1.2533 * diff_sigma(self._first_at_zero + self._at_zero) * math.sqrt(2 / 8)
        return median(first) - median(last) > noise

    def _make(self, step: int, severity: str, message: str, evidence: dict[str, Any],
              end_step: int | None = None) -> Finding:
        return Finding(LR_SCHEDULE, severity, step, message, end_step=end_step, evidence=evidence, source=self.name)

    def state_dict(self) -> dict[str, Any]:
        return {"tracker": self.tracker.state_dict(), "before": self._before, "at_zero": self._at_zero,
                "first_at_zero": self._first_at_zero, "lr_before": self._lr_before}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.tracker.load_state_dict(state["tracker"])
        self._before = list(state.get("before", []))
        self._at_zero = list(state.get("at_zero", []))
        self._first_at_zero = list(state.get("first_at_zero", []))
        self._lr_before = state.get("lr_before")


def _fmt(x: float | None) -> str:
    return "?" if x is None else f"{x:.4g}"
