"""Automatic recovery: a loss spike that does not come back, a divergence or a non-finite loss rolls the
run back to the newest verified checkpoint from before the onset (off by default; one line to turn on):

    mon = Monitor(run_dir, model, opt, checkpoints=Checkpoints("ckpt", every=50),
                  recovery=Recovery(patience=30, lr_factor=0.5, skip_batches=True, max_rollbacks=3))
    step = mon.resume()
    while step < total:
        if mon.should_skip(step):          # a batch a rollback skips: draw it and drop it
            next(batches); step += 1; continue
        ...; ctl = mon.step(step, loss=loss)
        if ctl.stop:                       # recovery gave up (or a preemption in "stop" mode)
            break
        step = ctl.resume_step if ctl.rollback else step + 1

Who does what, and on which thread:

* the record writer's thread (after the detectors, findings already folded into incidents) decides:
  a non-finite loss point or a `nan`/`divergence` finding asks at once; a `loss_spike` (warning or worse)
  asks when it is still not back `patience` steps after its onset. One request per incident: while a
  request waits, everything else is ignored (the abandoned steps' follow-ups and symptoms included);
* the training thread carries it out inside `mon.step()` at the next step, after the step was recorded:
  flush, restore the newest verified checkpoint at or before onset - 2 (whose weights gave the last
  good loss) (model, optimizer, scheduler,
  RNG, data position, the detectors' state), set the checkpoints after it aside, move the abandoned
  steps' points to `points_superseded` and note the range in the store's `superseded` table, multiply
  the LR by `lr_factor`, note the batches to skip, and set `Control.rollback_to`/`resume_step`;
* after a restore, an onset is searched only in the steps trained since (a detector's window restored with
  the checkpoint may reach back before it: such an onset is taken as the first step after the restore); a
  fault back after a rollback that did not hold goes further back than that rollback did, when a checkpoint
  is kept there, else to the same checkpoint again (the LR lowered once more);
* each rollback, its outcome (`recovered` once the run passes the onset by `patience` steps with a
  finite loss) and giving up (after `max_rollbacks`, or with no checkpoint before the onset: the run is
  asked to stop) are written as `recovery` events and announced through the alert channels; alerts of
  the abandoned steps still open are closed with a note saying so.

Nothing here raises into training: a failure is counted by the Monitor like any other.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stethoscope.findings.catalogue import DIVERGENCE, LOSS_SPIKE, NAN
from stethoscope.records import LOSS, SEVERITIES, Finding, severity_rank

log = logging.getLogger(__name__)

TRIGGERS = (LOSS_SPIKE, DIVERGENCE, NAN)
_LOSSES = 4096  # recent loss values kept (the level before an incident)


@dataclass(frozen=True)
class Recovery:
    """The automatic recovery policy (see the module docstring). Validated on creation."""

    patience: int = 20
    """Steps a loss spike may stay up after its onset before the run is rolled back."""
    lr_factor: float | None = 0.5
    """Multiply every LR by this at each rollback (OPT's practice); None leaves the LR alone."""
    skip_batches: bool | int = True
    """Batches to skip after a rollback: True, those of the steps from the restored checkpoint through the
    onset; an int, that many from the restored checkpoint on (PaLM skipped 200-500); False, none."""
    max_rollbacks: int = 3
    """Give up after this many rollbacks in the run: the next incident stops it, with a critical alert."""
    on: tuple[str, ...] = TRIGGERS
    """What triggers a rollback: any of "loss_spike", "divergence", "nan" (a non-finite loss)."""
    min_severity: str = "warning"
    """A loss spike or divergence finding below this severity is left alone."""
    lookback: int | None = 200
    """Retention keeps the newest checkpoint at least this many steps old besides the newest `keep_last`:
    what a rollback goes back to when a finding arrives late (a divergence is seen over a trend) and names
    an onset older than the newest checkpoints. None: only `keep_last` (and the hold of an open incident)."""

    def __post_init__(self) -> None:
        if not isinstance(self.patience, int) or self.patience < 0:
            raise ValueError(f"Recovery.patience must be an int >= 0, got {self.patience!r}")
        if self.lr_factor is not None and not (isinstance(self.lr_factor, (int, float)) and 0 < self.lr_factor <= 1):
            raise ValueError(f"Recovery.lr_factor must be in (0, 1] or None, got {self.lr_factor!r}")
        if not isinstance(self.skip_batches, (bool, int)) or self.skip_batches < 0:
            raise ValueError(f"Recovery.skip_batches must be True, False or an int >= 0, got {self.skip_batches!r}")
        if not isinstance(self.max_rollbacks, int) or self.max_rollbacks < 0:
            raise ValueError(f"Recovery.max_rollbacks must be an int >= 0, got {self.max_rollbacks!r}")
        bad = [t for t in self.on if t not in TRIGGERS]
        if bad or not self.on:
            raise ValueError(f"Recovery.on must name some of {', '.join(TRIGGERS)}, got {self.on!r}")
        if self.lookback is not None and (not isinstance(self.lookback, int) or self.lookback < 1):
            raise ValueError(f"Recovery.lookback must be an int >= 1 or None, got {self.lookback!r}")
        if self.min_severity not in SEVERITIES:
            raise ValueError(f"Recovery.min_severity must be one of {', '.join(SEVERITIES)}, got {self.min_severity!r}")


@dataclass
class _Request:
    onset: int
    type: str
    reason: str


@dataclass
class _Rollback:
    number: int
    onset: int
    restored: int
    abandoned_to: int
    type: str
    due: int
    level: float | None
    key: str
    channels: list[int]


class RecoveryPolicy:
    """One run's recovery: decides on the writer thread, acts on the training thread (module docstring)."""

    def __init__(self, config: Recovery) -> None:
        self.config = config
        self.rollbacks: list[dict[str, Any]] = []
        """What each rollback did (onset, restored step, skipped batches, LR factor, outcome)."""
        self.skips: list[tuple[int, int]] = []
        """Inclusive step ranges whose batches the loop skips (`Monitor.should_skip`)."""
        self.lr_scale = 1.0
        """The product of the LR factors applied so far: a loop that sets the LR itself each step multiplies by it."""
        self.gave_up: str | None = None
        self._lock = threading.Lock()
        self._request: _Request | None = None
        self._watch: dict[str, int] = {}  # unrecovered loss spikes: finding key -> onset
        self._last = -1
        self._losses: OrderedDict[int, float] = OrderedDict()
        self._pending: _Rollback | None = None  # a rollback whose outcome is not known yet
        self._monitor: Any = None
        self._restored_scale: float | None = None  # the LR scale of the checkpoint a rollback just restored
        self._since = 0  # the first step trained since the last restore: an onset is searched from here on

    # -- state (saved with each checkpoint, in the Monitor's) ---------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"rollbacks": [dict(r) for r in self.rollbacks], "skips": [list(s) for s in self.skips],
                "lr_scale": self.lr_scale, "gave_up": self.gave_up}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """A resume adopts the saved history (rollbacks, skips, LR scale); a rollback restoring an older
        checkpoint keeps the history it is adding to, and notes the LR scale that checkpoint was saved with."""
        self._restored_scale = float(state.get("lr_scale", 1.0))
        if len(state.get("rollbacks", [])) <= len(self.rollbacks):
            return  # a rollback in progress (or nothing new): our history is the newer one
        self.rollbacks = [dict(r) for r in state.get("rollbacks", [])]
        self.skips = [(int(a), int(b)) for a, b in state.get("skips", [])]
        self.lr_scale = self._restored_scale
        self.gave_up = state.get("gave_up")
        self._since = self.rollbacks[-1]["restored"] + 1 if self.rollbacks else 0

    def bind(self, monitor: Any) -> None:
        self._monitor = monitor
        ck = getattr(monitor, "checkpoints", None)
        if ck is not None:
            ck.lookback = self.config.lookback

    def see(self, points: Sequence[tuple[str, int, float, Any]], findings: list[Finding]) -> list[Finding]:
        """A stage of the Monitor's observer chain (capture/observers.py): the policy looks at each batch."""
        try:
            self.on_points(points, findings or [])
        except Exception:  # noqa: BLE001 - recovery must never cost the run its findings
            log.exception("stethoscope recovery failed to look at a batch of points")
        return findings

    def end(self, findings: list[Finding]) -> list[Finding]:
        return findings

    def should_skip(self, step: int) -> bool:
        return any(a <= step <= b for a, b in self.skips)

    # -- the writer thread ----------------------------------------------------------------------
    def on_points(self, points: Sequence[tuple[str, int, float, Any]], findings: list[Finding]) -> None:
        with self._lock:
            if self._request is not None or self.gave_up is not None:
                return  # one request per incident: the abandoned steps' follow-ups are not new ones
            for name, step, value, _ in points:
                if name != LOSS:
                    continue
                self._last = max(self._last, step)
                if not math.isfinite(value):
                    if NAN in self.config.on:
                        self._ask(step, NAN, f"non-finite loss ({value}) at step {step}")
                        return
                    continue
                self._losses[step] = value
                if len(self._losses) > _LOSSES:
                    self._losses.popitem(last=False)
                if self._pending is not None and step >= self._pending.due and not self._watch:
                    self._recovered(step, value)
            for f in findings:
                if self._on_finding(f):
                    return
            for key, onset in list(self._watch.items()):
                if self._last - onset >= self.config.patience:
                    self._ask(onset, LOSS_SPIKE, f"loss spike at step {onset} not back after "
                              f"{self._last - onset} steps (patience {self.config.patience})")
                    return

    def _on_finding(self, f: Finding) -> bool:
        if f.step is None or f.evidence.get("withdrawn") or f.evidence.get("transient"):
            return False
        on = self.config.on
        symptoms = {s.get("type") for s in f.symptoms or ()}
        if NAN in on and (f.type == NAN or NAN in symptoms):
            self._ask(f.step, f.type, f"{f.type.replace('_', ' ')} at step {f.step}: {f.message}")
            return True
        key = f"{f.source}|{f.type}|{f.step}"
        if _over(f):  # before the severity test: a spike that came back may be downgraded as it does
            if self._watch.pop(key, None) is not None and not self._watch and self._pending is None:
                self._release_hold()  # it came back by itself: retention may let that checkpoint go again
            return False
        if severity_rank(f.severity) < severity_rank(self.config.min_severity):
            return False
        if f.type == DIVERGENCE and DIVERGENCE in on:
            self._ask(f.step, DIVERGENCE, f"divergence from step {f.step}: {f.message}")
            return True
        if f.type == LOSS_SPIKE and LOSS_SPIKE in on:
            self._watch[key] = f.step
            self._hold(f.step)
        return False

    def _ask(self, onset: int, kind: str, reason: str) -> None:
        if onset < self._since:  # a detector's window reaching back past the restore: those steps were judged
            reason += f" (dated to step {onset}, before the restored checkpoint: taken as step {self._since})"
            onset = self._since
        self._request = _Request(onset, kind, reason)
        self._hold(onset)

    def _hold(self, onset: int) -> None:
        """Retention keeps the newest checkpoint from before an open incident (it is what we roll back to)."""
        ck = getattr(self._monitor, "checkpoints", None)
        if ck is not None:
            ck.hold = _before(onset) if ck.hold is None else min(ck.hold, _before(onset))

    def _recovered(self, step: int, value: float) -> None:
        rb, self._pending = self._pending, None
        before = f" ({_g(rb.level)} before the incident)" if rb.level is not None else ""
        msg = (f"recovered after rollback {rb.number}: the loss is {_g(value)} at step {step}{before}, "
               f"{step - rb.onset} steps past the {rb.type.replace('_', ' ')} at step {rb.onset}")
        self.rollbacks[rb.number - 1]["outcome"] = msg
        self._event(step, "info", msg, {"action": "recovered", "rollback": rb.number, "loss": value,
                                        "level_before": rb.level, "onset": rb.onset})
        self._announce("resolve", rb.key, "rollback", "warning", rb.onset, msg, f"recovered at step {step}",
                       channels=rb.channels)
        self._release_hold()

    # -- the training thread --------------------------------------------------------------------
    def after_step(self, step: int, control: Any) -> None:
        control.rollback_to = None
        control.resume_step = None
        req = self._request
        if req is None:
            return
        mon = self._monitor
        cfg = self.config
        if len(self.rollbacks) >= cfg.max_rollbacks:
            self._give_up(step, control, req, f"{len(self.rollbacks)} rollbacks already (max_rollbacks "
                          f"{cfg.max_rollbacks}) and again {req.reason}")
            return
        mon.flush()  # the abandoned steps are durable (and seen by the detectors) before we go back
        alerts = getattr(mon, "_alerts", None)
        kept = alerts.state_dict() if alerts is not None else None  # the paged incidents stay known
        ck = mon.checkpoints
        self._restored_scale = None
        restored = None
        for limit in self._limits(req.onset):
            restored = ck.rollback(before=limit)
            if restored is not None:
                break
        if restored is None:
            self._give_up(step, control, req, f"{req.reason}, and no verified checkpoint from before step "
                          f"{req.onset} to roll back to")
            return
        if alerts is not None and kept is not None:
            alerts.load_state_dict(kept)
        number = len(self.rollbacks) + 1
        mon._recorder.call("supersede", restored + 1, step, number)
        skip = self._skip_range(restored, req.onset)
        if skip is not None:
            self.skips.append(skip)
        if cfg.lr_factor is not None:
            self.lr_scale *= cfg.lr_factor
        # the optimizer's LR is the restored checkpoint's: bring it to the run's scale (the factors of the
        # rollbacks since that checkpoint was saved included)
        restored_scale = self._restored_scale if self._restored_scale is not None else 1.0
        if self.lr_scale != restored_scale:
            ck._scale_lr(self.lr_scale / restored_scale)
        level = self._level_before(req.onset)
        control.request_rollback(_before(req.onset), f"recovery: {req.reason}")
        control.resume_step = restored + 1
        what = [f"restored the checkpoint of step {restored}", f"steps {restored + 1}-{step} superseded"]
        if skip is not None:
            what.append(f"skipping the batches of steps {skip[0]}-{skip[1]}")
        if cfg.lr_factor is not None:
            what.append(f"LR x{cfg.lr_factor:g} (now x{self.lr_scale:.3g} of the schedule)")
        msg = f"rolled back (rollback {number} of at most {cfg.max_rollbacks}) after {req.reason}: " + "; ".join(what)
        key = f"{self._tag()}/recovery"  # one key for the run's rollbacks: they update one incident
        if self._pending is not None:
            self.rollbacks[self._pending.number - 1]["outcome"] = f"did not hold: {req.reason}"
        channels = self._announce("trigger", key, "rollback", "warning", req.onset, msg,
                                  f"rollback {number} of {cfg.max_rollbacks}", abandoned=restored)
        due = max(req.onset, step) + max(1, cfg.patience)
        self.rollbacks.append({"rollback": number, "onset": req.onset, "type": req.type, "restored": restored,
                               "abandoned_to": step, "skip": list(skip) if skip else None,
                               "lr_factor": cfg.lr_factor, "lr_scale": self.lr_scale, "reason": req.reason,
                               "outcome": None})
        self._event(step, "warning", msg, {"action": "rollback", **self.rollbacks[-1]})
        log.warning("stethoscope: %s", msg)
        with self._lock:
            self._watch.clear()
            self._last = restored
            self._since = restored + 1
            for s in [s for s in self._losses if s > restored]:
                del self._losses[s]
            self._pending = _Rollback(number, req.onset, restored, step, req.type, due, level, key, channels)
            self._request = None

    def _limits(self, onset: int) -> list[int]:
        """The steps to look for a checkpoint at or before, in order. A fault back after a rollback that did not
        hold goes further back than that rollback did (when a checkpoint is kept there); else the newest from
        before the onset; else, for a fault back right after a restore, the restored checkpoint again (with
        the LR lowered once more): the remaining rollbacks are used, not given up."""
        limits = [_before(onset)]
        if self.rollbacks:
            last = self.rollbacks[-1]["restored"]
            if self._pending is not None:
                limits.insert(0, min(limits[0], last - 1))
            if limits[-1] < last:
                limits.append(last)
        return list(dict.fromkeys(limits))

    def _skip_range(self, restored: int, onset: int) -> tuple[int, int] | None:
        n = self.config.skip_batches
        if n is True:
            return (restored + 1, onset)
        if n is False or n == 0:
            return None
        return (restored + 1, restored + int(n))

    def _give_up(self, step: int, control: Any, req: _Request, why: str) -> None:
        self.gave_up = why
        self._request = None
        msg = f"recovery gave up: {why}; the run is stopped at step {step}"
        control.request_stop(msg)
        self._event(step, "critical", msg, {"action": "gave_up", "rollbacks": len(self.rollbacks), "onset": req.onset,
                                            "reason": req.reason})
        log.error("stethoscope: %s", msg)
        self._announce("stop", f"{self._tag()}/recovery", "rollback", "critical", req.onset, msg,
                       f"gave up after {len(self.rollbacks)} rollback(s)")

    def _level_before(self, onset: int) -> float | None:
        before = [v for s, v in self._losses.items() if onset - 20 <= s < onset]
        return sum(before) / len(before) if before else None

    def _release_hold(self) -> None:
        ck = getattr(self._monitor, "checkpoints", None)
        if ck is not None:
            ck.hold = None

    # -- records and alerts ------------------------------------------------------------------------
    def _event(self, step: int, severity: str, message: str, data: dict[str, Any]) -> None:
        self._monitor._recorder.call("write_events", [(step, time.time(), "recovery", severity, "recovery",
                                                       message, data)])

    def _tag(self) -> str:
        alerts = getattr(self._monitor, "_alerts", None)
        rank = getattr(self._monitor, "rank", 0)
        return f"{alerts.rules._tag}/r{rank}" if alerts is not None else f"r{rank}"

    def _announce(self, kind: str, key: str, type_: str, severity: str, step: int, message: str, note: str,
                  channels: list[int] | None = None, abandoned: int | None = None) -> list[int]:
        """Send an alert through the run's channels (none configured: only the log and the event say it)."""
        alerts = getattr(self._monitor, "_alerts", None)
        if alerts is None:
            return []
        from stethoscope.act.alert import Alert

        rules = alerts.rules
        now = time.time()
        out = []
        if abandoned is not None:  # the incidents of the abandoned steps: closed, saying why
            for a in [a for a in rules.open if a.step is None or a.step > abandoned]:
                rules.open.remove(a)
                closing = rules._alert("resolve", a, now, f"the run rolled back to step {abandoned}; "
                                                          f"see the rollback alert")
                out += [(ch, closing) for ch in a.notified]
        wanted = sorted(set(channels or []) | set(rules._channels_for(severity)))
        alert = Alert(kind=kind, key=key, type=type_, severity=severity, step=step, rank=rules.rank, message=message,
                      run_dir=rules.run_dir, note=note, time=now)
        out += [(ch, alert) for ch in wanted]
        alerts.dispatcher.submit(out)
        return wanted


def _before(onset: int) -> int:
    """The newest checkpoint step to go back to for an incident whose first bad loss is at `onset`: the
    checkpoint of step k holds the weights after update k, which gave the loss of step k + 1; onset - 1's
    update made the first bad loss (or the bad batch at onset made it, and onset - 1 is fine): onset - 2
    is the last known good."""
    return onset - 2


def _over(f: Finding) -> bool:
    return f.end_step is not None and f.evidence.get("recovered") in (True, "fully")


def _g(v: float | None) -> str:
    return "-" if v is None else f"{v:.4g}"
