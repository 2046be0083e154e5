"""Loss spikes and grad-norm spikes: robust, upward only, warm-up aware, followed up.

A value is a spike when it lies more than `spike_sigma` noise sigmas above the recent level (the
median of the last `level_window` clean values) and at least a minimum fraction above it. The noise
is the robust spread of step-to-step differences (trends do not inflate it), shrunk towards a prior
when the series is short: an excerpt of three lines cannot tell its own noise, so only a jump that
would be extreme under ordinary noise counts there.

A spike opens an incident; values inside it never enter the baseline. The incident's follow-ups
(same source, type and step) say "recovered after N steps", "not recovered", and a loss spike
that has not come back after `divergence_min_steps` steps is reported once as a `divergence`.
A grad-norm incident that keeps rising, or that the loss follows, becomes a `grad_explosion`;
a one-step blip that recovers stays an `info` grad_spike. The loss-spike finding names its cause
where the data allows: the grad norm rising N steps earlier (BLOOM-176B: 2-3 steps), LR still in
warm-up, right after warm-up, or no lead-up at all (a single bad batch).
"""

from __future__ import annotations

import math
from typing import Any

from stethoscope.detect.blowup import lr_blowup
from stethoscope.detect.config import DetectConfig
from stethoscope.detect.lr import LrTracker
from stethoscope.detect.lr_held import held_cause, held_jump, level_back
from stethoscope.detect.spike_level import forget, never_back, observe, watch
from stethoscope.detect.spike_findings import divergence, g, grad_finding, loss_finding, mark_expected
from stethoscope.detect.spike_incident import (
    REAL_SPIKE_RATIO, RECUR_RECORDS, brief_share, loss_recovered, loss_unrecovered, recurring, release,
    small_and_young, small_of_learned,
)
from stethoscope.detect.spike_track import Track, calm_before
from stethoscope.detect.stats import Window, shrunk_sigma
from stethoscope.findings.catalogue import GRAD_EXPLOSION, GRAD_SPIKE, LOSS_SPIKE
from stethoscope.records import GRAD_NORM, LOSS, LR, Finding, StepRecord

_RANGE_HISTORY = 64  # clean values before a spike whose level is old enough to read the loss's own range
_MIN_WARN_HISTORY = 2  # earlier values a loss spike needs before it can be a warning
_EARLY_RECORDS = 5  # ...and while it has fewer than this, a climb since the first record is the run's start,
_EARLY_PACE = 2.0  # when the spike goes on at up to this many times the climb's pace per record
_EXCURSION_N = 50  # values of the record-excursion test (`_record_excursion`)
# Within lead_steps after an upward off-schedule LR jump, a loss spike needs this fraction of spike_sigma:
# with its likely cause in the log, a rise of 3 sigmas is no longer a one-in-a-million fluke of the noise.
_EXPLAINED_BAR = 0.5
# A clean window whose noise is under 1/_CENSORED of the series' raw spread holds only the low values (censored by
# the spike bar itself, `Track.raw_sigma`); a clean window of ordinary noise is within a few tens of percent of it.
_CENSORED = 2.0


class SpikeDetector:
    """Loss spikes (loss_spike, escalating to divergence) and grad-norm spikes (grad_spike/grad_explosion)."""

    name = "spike"

    def __init__(self, config: DetectConfig | None = None, lr: LrTracker | None = None) -> None:
        self.config = config or DetectConfig()
        self.lr = lr if lr is not None else LrTracker(self.config)  # shared in a DetectorSet: one update per record
        self.loss = Track(self.config)
        self.grad = Track(self.config)
        self._last_step: int | None = None
        self._first_step: int | None = None
        self._first_loss: float | None = None
        self._last_reset: int | None = None
        self._blowup_jump: float | None = None  # the LR jump whose blow-up was reported (once per jump)
        self._came_back: list[float] | None = None  # [step, rise] of the biggest loss spike the run came back from
        self._watch: dict[str, Any] = {}  # recovered spikes whose level is judged at the end (`detect.spike_level`)

    # -- entry points -----------------------------------------------------------------------------
    def update(self, record: StepRecord) -> list[Finding]:
        values = record.values
        step = record.step
        out: list[Finding] = []
        self._track_schedule(record, out)
        if self._first_step is None:
            self._first_step = step
        g = values.get(GRAD_NORM)
        if g is not None and math.isfinite(g):
            self._on_grad(step, g, out)
        v = values.get(LOSS)
        if v is not None and math.isfinite(v):
            self._on_loss(step, v, values, out)
            watch(self._watch, out)
            observe(self._watch, step, v)
        elif v is not None and self.loss.incident is not None:
            self.loss.incident["blew_up"] = True  # an open jump that turned into NaN/Inf: a blow-up
        elif v is not None:
            out.extend(self._blown_up_by_lr(step, v))
        self._last_step = step
        return [self._at_reset(f) for f in out] if out and self._last_reset is not None else out

    def _at_reset(self, f: Finding) -> Finding:
        """A jump that starts right at a resume/schedule restart (within the grace window) is expected."""
        reset = self._last_reset
        if (f.type in (LOSS_SPIKE, GRAD_SPIKE, GRAD_EXPLOSION) and f.step is not None and reset is not None
                and 0 <= f.step - reset <= self.config.restart_grace_steps and not f.evidence.get("expected")):
            mark_expected(f, reset)
        return f

    def finish(self) -> list[Finding]:
        out: list[Finding] = []
        step = self._last_step
        if step is None:
            return out
        inc = self.loss.incident
        if inc is not None:
            out.extend(self._loss_unrecovered(inc, step))
        ginc = self.grad.incident
        if ginc is not None:
            f = grad_finding(ginc, self.name)
            f.message += f"; not back to its level by the last record (step {step})"
            f.evidence["recovered"] = False
            out.append(f)
        return out + (never_back(self._watch, self.config.recover_rel, step, self.name) if inc is None else [])

    # -- schedule context -------------------------------------------------------------------------
    def _track_schedule(self, record: StepRecord, out: list[Finding]) -> None:
        self.lr.observe(record)
        step = record.step
        reset = self.lr.recent_reset(step)
        if reset is None or reset == self._last_reset:
            return
        self._last_reset = reset
        for track, kind in ((self.loss, "loss"), (self.grad, "grad")):
            inc = track.incident
            if inc is not None and inc["start"] >= reset - self.config.restart_grace_steps:
                out.append(self._expected_jump(inc, kind, reset))
            track.reset()
        forget(self._watch)

    def _expected_jump(self, inc: dict[str, Any], kind: str, reset: int) -> Finding:
        return mark_expected(loss_finding(inc, self.name) if kind == "loss" else grad_finding(inc, self.name), reset)

    def _gap_check(self, t: Track, step: int, kind: str, out: list[Finding]) -> None:
        """A record far from the previous one (an excerpt's gap) is not compared with it."""
        last = t.recent.last()
        if last is None or step - last[0] <= self.config.gap_reset_steps:
            return
        if t.incident is not None:
            out.extend(self._loss_unrecovered(t.incident, last[0]) if kind == "loss"
                       else [self._grad_gap_close(t.incident, last[0])])
        t.reset()
        t.recent.clear()

    def _grad_gap_close(self, inc: dict[str, Any], last_step: int) -> Finding:
        f = grad_finding(inc, self.name)
        f.end_step = last_step
        f.message += f"; the log skips ahead after step {last_step}"
        return f

    def _settled(self, t: Any, kind: str, step: int, v: float, on_incident: Any, out: list[Finding]) -> bool:
        """The start every series update shares: a gap in the log, the recent history, an open incident
        (handled by `on_incident`), the very first value. True when nothing more is to be done."""
        self._gap_check(t, step, kind, out)
        t.recent.push(step, v)
        if t.incident is not None:
            on_incident(t.incident, step, v, out)
            return True
        if len(t.window) == 0:
            t.push(v)
            return True
        return False

    # -- grad norm --------------------------------------------------------------------------------
    def _on_grad(self, step: int, g: float, out: list[Finding]) -> None:
        t = self.grad
        if self._settled(t, "grad", step, g, self._grad_incident, out):
            return
        n = len(t.window)
        level = t.level()
        if level <= 0 or g < level * self.config.grad_spike_min_ratio:
            t.push(g)
            return
        sigma = shrunk_sigma(t.data_sigma(), n, self.config.grad_prior_rel_noise * level, self.config.prior_weight)
        if g <= level + self.config.spike_sigma * sigma:
            t.push(g)
            return
        t.incident = {
            "start": step, "level": level, "sigma": sigma, "first": g, "peak": g, "peak_step": step,
            "last": g, "rising": 1, "elevated": 1, "escalated": False, "loss_followed": False,
            "warmup": self.lr.in_warmup(step), "n": n,
        }
        out.append(grad_finding(t.incident, self.name))

    def _grad_incident(self, inc: dict[str, Any], step: int, g: float, out: list[Finding]) -> None:
        cfg = self.config
        if g <= inc["level"] * cfg.grad_recover_ratio:
            self.grad.incident = None
            self.grad.push(g)
            f = grad_finding(inc, self.name)
            f.end_step = step
            f.message += f"; back to its level after {step - inc['start']} steps"
            f.evidence["recovered"] = True
            f.evidence["recovered_step"] = step
            out.append(f)
            return
        inc["rising"] = inc["rising"] + 1 if g > inc["last"] else 1
        inc["elevated"] += 1
        inc["last"] = g
        if g > inc["peak"]:
            inc["peak"], inc["peak_step"] = g, step
        huge = inc["peak"] >= cfg.grad_explosion_ratio * inc["level"] and (inc["elevated"] >= 2 or inc["loss_followed"])
        # a climb is growth, not noise wobbling upward: over its rising records the norm at least doubled
        climbing = inc["rising"] >= cfg.explosion_rising_records and not inc["warmup"] and inc["peak"] >= 2 * inc["first"]
        if not inc["escalated"] and (climbing or huge):
            inc["escalated"] = True
            out.append(grad_finding(inc, self.name))

    # -- loss -------------------------------------------------------------------------------------
    def _on_loss(self, step: int, v: float, values: dict[str, float], out: list[Finding]) -> None:
        t = self.loss
        if self._first_loss is None:
            self._first_loss = v
        if self._settled(t, "loss", step, v, self._loss_incident, out):
            return
        n = len(t.window)
        level = t.level()
        scale = abs(level) if level != 0 else 1e-12
        if v < level + self.config.loss_spike_min_rel * scale or _signed(v, level, t.window):
            t.push(v)
            return
        sigma = shrunk_sigma(t.data_sigma(), n, self.config.loss_prior_rel_noise * scale, self.config.prior_weight)
        raw = t.raw_sigma()
        if raw > _CENSORED * sigma:  # the clean window lost the series' own spread: measure by that (`Track.raw_sigma`)
            sigma = raw
        bar = self.config.spike_sigma
        if self.lr.jump_cause(step, self.config.lead_steps) is not None:
            bar *= _EXPLAINED_BAR  # the LR just jumped up off its schedule: a rise now has its cause in hand
        if v <= level + bar * sigma and not _record_excursion([x for _, x in t.recent.items()[:-1]], v):
            t.push(v)
            return
        t.incident = self._open_loss(step, v, level, sigma, n, values)
        out.append(loss_finding(t.incident, self.name))
        ginc = self.grad.incident
        if ginc is not None and step - ginc["start"] <= self.config.lead_steps:
            ginc["loss_followed"] = True
            if ginc["escalated"] or ginc["peak"] >= self.config.grad_explosion_ratio * ginc["level"]:
                ginc["escalated"] = True  # an order of magnitude, and the loss went with it
                out.append(grad_finding(ginc, self.name))

    def _open_loss(self, step: int, v: float, level: float, sigma: float, n: int,
                   values: dict[str, float]) -> dict[str, Any]:
        rel = (v - level) / (abs(level) or 1e-12)
        inc = {
            # recovery is judged against the core noise (MAD), not the heavy tails the detection allowed for
            "start": step, "level": level, "sigma": sigma, "data_sigma": self.loss.window.diff_sigma(tails=False),
            "first": v,
            "peak": v, "peak_step": step, "last": v, "last_step": step, "rel": rel, "n": n,
            "respikes": 0, "diverged": False, "dipped": False, "records": 1,
            # one earlier value cannot tell the run's noise: flag it, but quietly
            "severity": "warning" if rel >= self.config.loss_spike_warn_rel and n >= _MIN_WARN_HISTORY else "info",
            "causes": self._causes(step, values), "lr": values.get(LR), "gap": _median_gap(self.loss.recent.items()),
        }
        if n >= _RANGE_HISTORY:  # the highest the loss printed by itself lately: its own range (`loss_recovered`)
            inc["range"] = max((x for _, x in self.loss.recent.items()[:-1] if math.isfinite(x)), default=None)
        inc["calm_before"] = calm_before(self.loss, level, max(2.0 * inc["data_sigma"], self.config.recover_rel * abs(level)))
        z = (v - level) / sigma if sigma else math.inf
        if inc["severity"] == "warning" and not (v >= REAL_SPIKE_RATIO * level and z >= 2 * self.config.spike_sigma):
            inc["severity"], inc["held"] = "info", "warning"  # a blip that comes straight back is a hard batch:
        elif inc["severity"] == "warning" and small_of_learned(inc, self._first_loss) is not None:
            inc["severity"], inc["held"] = "info", "warning"  # a small share of what was learned: held while small
        if "warning" in (inc["severity"], inc.get("held")) and \
                _early_climb(self.loss.window.values(), v, self.config.loss_spike_min_rel):
            inc["severity"], inc["early_climb"] = "info", True  # no level yet: the run's own start (`_early_climb`)
            inc.pop("held", None)
        if recurring(inc, self._came_back):  # as big as one the run came back from: held while it is brief
            inc["recurring"] = list(self._came_back or ())
            if inc["severity"] == "warning":
                inc["severity"], inc["held"] = "info", "warning"
        return inc  # the page waits one record (`_loss_incident`) rather than page for a batch

    def _causes(self, step: int, values: dict[str, float]) -> list[str]:
        causes: list[str] = []
        lead = self._grad_lead(step, values.get(GRAD_NORM))
        if lead:
            causes.append(lead)
        lr = values.get(LR)
        jumped = self.lr.jump_cause(step, self.config.lead_steps)
        if jumped:
            causes.append(jumped)
        if self.lr.in_warmup(step):
            causes.append(f"LR still in warm-up and rising (LR {g(lr)} at step {step})")
        since = self.lr.since_warmup_end(step)
        if since is not None and 0 <= since <= self.config.post_warmup_steps:
            peak = self.lr.warmup_peak or self.lr.peak  # the schedule's peak, not a jump above it
            causes.append(f"spike {since} steps after LR warm-up ended (peak LR {g(peak)}): peak LR too high?")
        if not lead and self.grad.window and values.get(GRAD_NORM) is not None:
            causes.append(f"no lead-up: single bad batch at step {step} (look up the batch ids of step {step})")
        elif not lead and not causes:
            causes.append(f"no grad norm logged; a bad batch at step {step} is the usual suspect")
        return causes

    def _grad_lead(self, step: int, g_now: float | None) -> str | None:
        ginc = self.grad.incident
        if ginc is not None and step - ginc["start"] <= self.config.lead_steps:
            lead = step - ginc["start"]
            rise = f"{g(ginc['level'])} -> {g(ginc['first'])}"
            if lead == 0:
                return f"grad norm jumped at the same step ({rise})"
            return f"grad norm rose {lead} step{'s' if lead > 1 else ''} before the loss ({rise}, peak {g(ginc['peak'])})"
        if g_now is not None and math.isfinite(g_now) and self.grad.window:
            level = self.grad.level()
            if level > 0 and g_now >= 1.5 * level:
                return f"grad norm rose at the same step (x{g_now / level:.2g}: {g(level)} -> {g(g_now)})"
        return None

    def _loss_incident(self, inc: dict[str, Any], step: int, v: float, out: list[Finding]) -> None:
        cfg = self.config
        scale = abs(inc["level"]) or 1e-12
        tol = max(2.0 * inc["data_sigma"], cfg.recover_rel * scale)
        j = None if inc["diverged"] or inc["severity"] != "warning" or v <= inc["level"] + tol else \
            held_jump(self.lr, inc, step, cfg.lead_steps)
        if j is not None:  # a rise still up under an LR jump that stayed: a divergence until its level is back
            inc["diverged"], inc["diverged_at"], inc["lr_held"] = True, step, True
            inc["causes"] = [held_cause(j)] + [c for c in inc["causes"] if not c.startswith("LR jumped")]
            out.append(divergence(inc, step, self.name))
        back = level_back(inc, v, cfg.recover_rel * scale) if inc.get("lr_held") else True  # every value: the level
        if v <= inc["level"] + tol and back:
            self.loss.incident = None
            self.loss.push(v)
            out.extend(loss_recovered(inc, step, self.config, self._first_loss, self._first_step, self.name))
            rise = inc["peak"] - inc["level"]
            if not inc["diverged"] and (self._came_back is None or rise > self._came_back[1]):
                self._came_back = [float(inc["start"]), rise]
            return
        threshold = inc["level"] + max(cfg.spike_sigma * inc["sigma"], cfg.loss_spike_min_rel * scale)
        if v <= threshold:
            inc["dipped"] = True
        elif inc["dipped"]:
            inc["respikes"] += 1  # a further spike inside the open incident: folded, not re-reported
            inc["dipped"] = False
        if v > inc["peak"]:
            inc["peak"], inc["peak_step"] = v, step
        inc["last"], inc["last_step"] = v, step
        inc["records"] = inc.get("records", 1) + 1
        brief = "held" in inc and step - inc["start"] < cfg.divergence_min_steps and \
            brief_share(inc, step, self._first_step) is not None
        small = small_of_learned(inc, self._first_loss) is not None
        brief = brief or ("recurring" in inc and inc["records"] <= RECUR_RECORDS) or \
            small_and_young(inc, self._first_loss)
        # a brief bump in an aggregated print, or one small against what the run had learned, does not page while so
        if not brief and not small and release(inc):
            out.append(loss_finding(inc, self.name))
        # a rise small against what the run had learned is no divergence while it stays so (a log printing every 500
        # steps spans divergence_min_steps in one record); the records' end still judges it (`loss_unrecovered`)
        if not inc["diverged"] and not small and step - inc["start"] >= cfg.divergence_min_steps:
            inc["diverged"] = True
            inc["diverged_at"] = step
            out.append(divergence(inc, step, self.name))

    def _loss_unrecovered(self, inc: dict[str, Any], step: int) -> list[Finding]:
        return loss_unrecovered(inc, step, self.loss, self.config, self._first_loss, self.name)

    def _blown_up_by_lr(self, step: int, v: float) -> list[Finding]:
        """A NaN/Inf loss right after an LR jump: a divergence (detect/blowup.py)."""
        found = lr_blowup(self.lr, step, v, self._blowup_jump, self.config.lead_steps,
                          self.loss.level() if self.loss.window else None, self.name)
        if found is None:
            return []
        self._blowup_jump = found.evidence["lr_jump_step"]
        return [found]

    # -- state ------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "lr": self.lr.state_dict(), "loss": self.loss.state_dict(), "grad": self.grad.state_dict(),
            "last_step": self._last_step, "last_reset": self._last_reset, "blowup_jump": self._blowup_jump,
            "first_step": self._first_step, "first_loss": self._first_loss, "came_back": self._came_back,
            "watch": self._watch,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.lr.load_state_dict(state["lr"])
        self.loss.load_state_dict(state["loss"])
        self.grad.load_state_dict(state["grad"])
        self._last_step = state.get("last_step")
        self._last_reset = state.get("last_reset")
        self._blowup_jump = state.get("blowup_jump")
        self._first_step = state.get("first_step")
        self._first_loss = state.get("first_loss")
        self._came_back = state.get("came_back")
        self._watch = state.get("watch", {})


def _early_climb(before: list[float], v: float, min_rel: float) -> bool:
    """Has the loss climbed since its first record, by a spike's size already, and does `v` go on at about that
    pace? Then there is no level it spiked from: the run starts by rising (an LR warm-up on pretrained weights, a
    new head: YOLOv9's 3.74, 4.34, 5.13, 5.54 and back over 30 epochs), which a spike from two records cannot
    tell from noise. A jump far past the climb's pace is still a spike."""
    if not 2 <= len(before) < _EARLY_RECORDS or any(b <= a for a, b in zip(before, before[1:])):
        return False
    climb = before[-1] - before[0]
    return climb >= min_rel * abs(before[0]) and v - before[-1] <= _EARLY_PACE * climb / (len(before) - 1)


def _median_gap(items: list[tuple[int, float]]) -> int:
    gaps = sorted(b[0] - a[0] for a, b in zip(items, items[1:]))
    return gaps[len(gaps) // 2] if gaps else 1


def _signed(v: float, level: float, window: Window) -> bool:
    """A loss changing sign (a policy objective, centred on 0) has no scale to measure a jump by."""
    values = window.values()
    return level == 0 or min(values, default=v) < 0 < max(values, default=v) or (v < 0) != (level < 0)


def _record_excursion(raw: list[float], v: float) -> bool:
    """Twice as far above the median of the last `_EXCURSION_N` raw values as the highest of them: a value
    no spread estimate needs to vouch for (a noisy per-step log's sigma can hide a one-batch spike that
    anyone looking at the curve sees at once). Raw values, spikes included: the clean window holds only the
    values under the spike bar, whose top a heavy-tailed loss tops by itself (`Track.raw_sigma`)."""
    if len(raw) < _EXCURSION_N:
        return False
    last = raw[-_EXCURSION_N:]
    mid = sorted(last)[_EXCURSION_N // 2]
    return v - mid > 2 * (max(last) - mid) > 0
