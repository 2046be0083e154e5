"""Gradient health beyond single spikes: ceiling/slow growth, vanishing/dead, clipping, update ratio.

* grad_explosion - the grad norm over an absolute ceiling (when configured), or its recent median
  `grad_growth_ratio` times its post-warm-up baseline (a slow climb that no single step shows).
* grad_vanishing - the grad norm a `vanishing_ratio` fraction of its baseline, or exactly 0 after
  having been positive, or every gradient element zero (`grad/zero_frac` ~ 1), for several records.
  A norm that is exactly 0 from the first record on is a logging artefact (old Megatron-DeepSpeed
  prints `grad norm: 0.000` under pipeline parallelism), not a dead model. A norm that fell while the
  loss fell x100 from its level when the norm's baseline was taken is a fit at its floor (an exact
  regression's residual, and with it the gradient, goes to ~0): info, not vanishing gradients.
* clipping - clipping engaged (`grad/clip_coef` < 1) on most recent records: the LR is probably high.
* update/weight ratio - `update/ratio` above `update_ratio_high` (healthy ~1e-3) warns that the LR
  is too high before the loss moves.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from stethoscope.detect.config import DetectConfig
from stethoscope.detect.lr import LrTracker
from stethoscope.detect.stats import Window, median
from stethoscope.findings.catalogue import CLIPPING, GRAD_EXPLOSION, GRAD_VANISHING, HEALTHY
from stethoscope.findings.catalogue import UPDATE_RATIO as UPDATE_RATIO_FINDING  # records.UPDATE_RATIO: the metric
from stethoscope.records import (
    GRAD_CLIP_COEF, GRAD_NORM, GRAD_ZERO_FRAC, LOSS, LR, UPDATE_RATIO, Finding, StepRecord,
)

_BASELINE_SKIP = 16  # early records (after warm-up) left out of the baseline: norms settle first
_BASELINE_N = 16
_LEVEL_N = 8
_GROWTH_EVERY = 4  # the O(level) growth check runs on every 4th record
_CONVERGED = 0.01  # the loss at <= 1% of its level at the grad baseline: the small norm is a fit at its floor


class GradientDetector:
    """Slow grad growth, absolute ceiling, vanishing/dead gradients, clipping, update/weight ratio."""

    name = "gradients"

    def __init__(self, config: DetectConfig | None = None, lr: LrTracker | None = None) -> None:
        self.config = config or DetectConfig()
        self.lr = lr if lr is not None else LrTracker(self.config)  # shared in a DetectorSet: one update per record
        self.level = Window(_LEVEL_N)
        self.loss_level = Window(_LEVEL_N)
        self.clips: deque[int] = deque(maxlen=self.config.clip_window)
        self._s: dict[str, Any] = {
            "seen": 0, "baseline": [], "base": None, "ever_positive": False, "low_run": 0, "low_start": None,
            "zero_run": 0, "zero_start": None, "ratio_run": 0, "ratio_start": None, "clipped": 0,
            "open": {},  # kind -> incident dict
        }

    def update(self, record: StepRecord) -> list[Finding]:
        values = record.values
        step = record.step
        self.lr.observe(record)
        out: list[Finding] = []
        self._check_reset(step, out)
        loss = values.get(LOSS)
        if loss is not None and math.isfinite(loss):
            self.loss_level.push(loss)
        g = values.get(GRAD_NORM)
        if g is not None and math.isfinite(g):
            self._on_norm(step, g, out)
        c = values.get(GRAD_CLIP_COEF)
        if c is not None and math.isfinite(c):
            self._on_clip(step, c, out)
        z = values.get(GRAD_ZERO_FRAC)
        if z is not None and math.isfinite(z):
            self._on_zero_frac(step, z, out)
        r = values.get(UPDATE_RATIO)
        if r is not None and math.isfinite(r):
            self._on_update_ratio(step, r, values.get(LR), out)
        return out

    def finish(self) -> list[Finding]:
        out = []
        for inc in self._s["open"].values():
            f = self._finding(inc)
            f.end_step = inc["last_step"]
            f.message += "; still so at the last record"
            out.extend(self._settled(inc, f))
        return out

    def _check_reset(self, step: int, out: list[Finding]) -> None:
        reset = self.lr.recent_reset(step)
        s = self._s
        if reset is None or reset == s.get("last_reset"):
            return
        s["last_reset"] = reset
        s.update(seen=0, baseline=[], base=None, low_run=0, zero_run=0, ratio_run=0, loss_base=None, loss_seen=[])
        self.level.clear()
        for kind in ("growth", "low"):
            inc = s["open"].pop(kind, None)
            if inc is not None:
                f = self._finding(inc)
                f.end_step = inc["last_step"]
                f.message += f"; ended by a resume/restart at step {reset}"
                out.extend(self._settled(inc, f))

    # -- grad norm --------------------------------------------------------------------------------
    def _on_norm(self, step: int, g: float, out: list[Finding]) -> None:
        s = self._s
        s["seen"] += 1
        if g > 0:
            s["ever_positive"] = True
        self.level.push(g)
        self._baseline(step, g)
        ceiling = self.config.grad_norm_ceiling
        if ceiling is not None:
            self._incident("ceiling", step, g > ceiling, out, value=g, limit=ceiling)
        base = s["base"]
        if base and (s["seen"] % _GROWTH_EVERY == 0 or "growth" in s["open"]):
            lvl = self.level.median()
            grown = len(self.level) >= _LEVEL_N and lvl >= self.config.grad_growth_ratio * base
            self._incident("growth", step, grown, out, value=lvl, limit=base)
        low = g == 0.0 and s["ever_positive"] or (base is not None and g <= self.config.vanishing_ratio * base)
        if low or s["low_run"]:  # the loss level (a sort of the window) only where it is read: not every step
            self._run("low", step, low, out, value=g, limit=base, loss_before=s.get("loss_base"), loss=self._loss())
        inc = s["open"].get("low")
        if inc is not None:
            inc["loss"] = self._loss()  # the message reads the loss level of the incident's last record

    def _loss(self) -> float | None:
        return self.loss_level.median() if len(self.loss_level) else None

    def _baseline(self, step: int, g: float) -> None:
        s = self._s
        if s["base"] is not None or self.lr.in_warmup(step) or g <= 0:
            return
        if s["seen"] <= _BASELINE_SKIP:
            return
        s["baseline"].append(g)
        if len(self.loss_level):
            s.setdefault("loss_seen", []).append(self.loss_level.median())
        if len(s["baseline"]) >= _BASELINE_N:
            s["base"] = median(s["baseline"])
            s["baseline"] = []
            seen = s.pop("loss_seen", None)
            s["loss_base"] = median(seen) if seen else None

    def _run(self, kind: str, step: int, cond: bool, out: list[Finding], **ev: Any) -> None:
        s = self._s
        key = f"{kind}_run"
        if not cond:
            s[key] = 0
            self._incident(kind, step, False, out, **ev)
            return
        if s[key] == 0:
            s[f"{kind}_start"] = step
        s[key] += 1
        if s[key] >= self.config.vanishing_records:
            self._incident(kind, step, True, out, start=s[f"{kind}_start"], **ev)

    # -- clipping, zero fraction, update ratio ----------------------------------------------------
    def _on_clip(self, step: int, coef: float, out: list[Finding]) -> None:
        s = self._s
        if len(self.clips) == self.clips.maxlen:
            s["clipped"] -= self.clips[0]
        hit = 1 if coef < 1.0 else 0
        self.clips.append(hit)
        s["clipped"] += hit
        n = len(self.clips)
        if n < self.config.clip_window // 2 or (not s["clipped"] and CLIPPING not in s["open"]):
            return
        frac = s["clipped"] / n
        is_open = CLIPPING in self._s["open"]
        cond = frac > self.config.clip_fraction if not is_open else frac > 0.5 * self.config.clip_fraction
        self._incident(CLIPPING, step, cond, out, value=frac, limit=self.config.clip_fraction)

    def _on_zero_frac(self, step: int, z: float, out: list[Finding]) -> None:
        if z >= 0.999 or self._s["zero_run"]:
            self._run("zero", step, z >= 0.999, out, value=z, limit=0.999)

    def _on_update_ratio(self, step: int, r: float, lr: float | None, out: list[Finding]) -> None:
        s = self._s
        hist = s.setdefault("ratio_hist", [])
        usual = sorted(hist)[len(hist) // 2] if len(hist) >= 3 else None
        hist.append(r)
        del hist[:-8]
        cfg = self.config
        # Once open (from a jump) the incident lasts while the ratio stays above the jump floor.
        high = r > cfg.update_ratio_high or (UPDATE_RATIO_FINDING in s["open"] and r > cfg.update_ratio_jump_min)
        # A sudden x10 jump warns at once: the weights just moved far more than usual, typically one
        # step before the loss does.
        jumped = usual and r >= cfg.update_ratio_jump * usual and r > cfg.update_ratio_jump_min
        if jumped and UPDATE_RATIO_FINDING not in s["open"]:
            s["ratio_start"], s["ratio_run"] = step, self.config.update_ratio_records
            self._incident(UPDATE_RATIO_FINDING, step, True, out, start=step, value=r, usual=usual,
                           limit=self.config.update_ratio_high, lr=lr)
            return
        if not high:
            if s["ratio_run"] or UPDATE_RATIO_FINDING in s["open"]:
                s["ratio_run"] = 0
                self._incident(UPDATE_RATIO_FINDING, step, False, out)
            return
        if s["ratio_run"] == 0:
            s["ratio_start"] = step
        s["ratio_run"] += 1
        if s["ratio_run"] >= self.config.update_ratio_records:
            self._incident(UPDATE_RATIO_FINDING, step, True, out, start=s["ratio_start"], value=r,
                           limit=self.config.update_ratio_high, lr=lr)

    # -- incidents --------------------------------------------------------------------------------
    def _incident(self, kind: str, step: int, cond: bool, out: list[Finding], start: int | None = None,
                  **ev: Any) -> None:
        opened = self._s["open"]
        inc = opened.get(kind)
        if inc is None:
            if cond:
                inc = {"kind": kind, "start": start if start is not None else step, "last_step": step,
                       "peak": ev.get("value"), **ev}
                opened[kind] = inc
                out.append(self._finding(inc))
            return
        if cond:
            inc["last_step"] = step
            inc["records"] = inc.get("records", 1) + 1
            v = ev.get("value")
            if v is not None and inc.get("peak") is not None and v > inc["peak"]:
                inc["peak"] = v
            if kind == CLIPPING and inc["records"] == self._clip_persists:
                out.append(self._finding(inc))  # it has lasted: now worth a person's attention
            return
        del opened[kind]
        inc["over"] = True
        f = self._finding(inc)
        f.end_step = inc["last_step"]
        f.message += f"; back to normal at step {step}"
        out.extend(self._settled(inc, f))

    def _finding(self, inc: dict[str, Any]) -> Finding:
        kind = inc["kind"]
        ev = {k: v for k, v in inc.items() if k not in ("kind", "start", "last_step", "said")}
        t, sev, msg = _DESCRIBE[kind](inc)
        if kind == "low" and _converged(inc):  # named by what it is: a converged fit, a non-problem
            ev["non_problem"] = "converged_fit"
            return Finding(HEALTHY, "info", inc["start"], msg.replace(": gradients vanish or the model is frozen", "")
                           + f" as the loss converged ({_g(inc['loss_before'])} -> {_g(inc['loss'])}):"
                           " a fit at its floor, not vanishing gradients", evidence=ev, source=self.name,
                           causes=[_FIT_CAUSE], fixes=[_FIT_FIX])
        if kind == "low":
            inc["said"] = True  # reported as vanishing gradients: a later converged verdict takes it back
        if kind == CLIPPING and (inc.get("over") or inc.get("records", 1) < self._clip_persists):
            # clipping bounds the update and harms nothing by itself; common for a while after warm-up
            sev, msg = "info", msg.replace(" the LR is probably too high", " updates bounded; harmless while it passes")
        ev.pop("over", None)
        return Finding(t, sev, inc["start"], msg, evidence=ev, source=self.name)

    def _settled(self, inc: dict[str, Any], f: Finding) -> list[Finding]:
        """`f`, after the vanishing-gradient finding it replaces when the incident turned out a converged fit."""
        if f.type != HEALTHY or not inc.get("said"):
            return [f]
        w = Finding(GRAD_VANISHING, "info", inc["start"], f"{f.message}; withdrawn: the loss converged",
                    evidence={"withdrawn": True}, source=self.name)
        return [w, f]

    @property
    def _clip_persists(self) -> int:
        """Records of clipping on most steps that make it a warning: two clip windows."""
        return 2 * self.config.clip_window

    def state_dict(self) -> dict[str, Any]:
        return {"lr": self.lr.state_dict(), "level": self.level.state_dict(), "clips": list(self.clips),
                "s": self._s, "loss_level": self.loss_level.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.lr.load_state_dict(state["lr"])
        self.level.load_state_dict(state["level"])
        self.clips = deque(state["clips"], maxlen=self.config.clip_window)
        self._s = state["s"]
        if "loss_level" in state:  # absent from states saved before the converged-fit check
            self.loss_level.load_state_dict(state["loss_level"])


def _converged(inc: dict[str, Any]) -> bool:
    """The loss fell to <= 1% of its level when the grad baseline was taken (a positive loss only: a signed
    objective has no floor at 0): the gradient of a fit at its floor is ~0 by itself."""
    before, now = inc.get("loss_before"), inc.get("loss")
    return before is not None and now is not None and before > 0 and 0 <= now <= _CONVERGED * before


_FIT_CAUSE = "the fit converged: the loss is ~0 against its earlier level, and its gradient with it"
_FIT_FIX = ("nothing while the eval loss holds; stop earlier to save compute. A training loss of ~0 on a hard "
            "task is suspect: check that the target does not leak into the inputs")


def _g(x: Any) -> str:
    return "?" if x is None else f"{x:.3g}"


_DESCRIBE = {
    "ceiling": lambda i: (GRAD_EXPLOSION, "error",
                          f"grad norm {_g(i['peak'])} over the ceiling {_g(i['limit'])} from step {i['start']}"),
    "growth": lambda i: (GRAD_EXPLOSION, "warning",
                         f"grad norm has grown to {_g(i['peak'])}, x{i['peak'] / i['limit']:.3g} its post-warm-up "
                         f"baseline {_g(i['limit'])} (a slow climb, no single spike)"),
    "low": lambda i: (GRAD_VANISHING, "warning",
                      f"grad norm fell to {_g(i['value'])} from step {i['start']}"
                      + (f" ({_g(i['limit'])} before)" if i.get("limit") else "")
                      + ": gradients vanish or the model is frozen"),
    "zero": lambda i: (GRAD_VANISHING, "warning",
                       f"all gradient elements are zero from step {i['start']}: no trainable parameters reached?"),
    CLIPPING: lambda i: (CLIPPING, "warning",
                           f"gradient clipping engaged on {i['peak']:.0%} of recent steps (from step {i['start']}):"
                           " the LR is probably too high"),
    UPDATE_RATIO_FINDING: lambda i: (UPDATE_RATIO_FINDING, "warning",
                               f"update/weight ratio {_g(i['peak'])} from step {i['start']} (healthy ~1e-3"
                               + (f", x{i['peak'] / i['usual']:.3g} its usual {_g(i['usual'])}" if i.get("usual")
                                  else "") + "): LR too high - expect the loss to spike or diverge"),
}
