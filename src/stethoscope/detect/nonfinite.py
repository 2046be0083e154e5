"""Non-finite loss, grad norm or eval loss: one critical `nan` finding per incident, at the exact step.

An incident opens at the first non-finite value and folds every later one in until
`nan_quiet_steps` steps pass without any (by default the catalogue's `resolve_steps` for `nan`: a
burst after that is a new incident); its follow-up (same key) gives the end step, the count
and whether the run came back. A grad norm that is non-finite while the loss stays finite is, for up to
`SKIPPED_STEPS` records, what a loss scaler does with an fp16 overflow step (it skips it and lowers the
scale): harmless when rare, so `info`; it is critical once it lasts longer or the loss follows (without a
scaler the NaN update reaches the weights and the next loss is non-finite), and a longer grad-only burst
that ended is a warning.

The opening names what the records before it show (`causes`, answered by the advice): an LR that rose
in the last `_HISTORY` records, a loss or grad norm that grew, or neither (an LR held and a level kept:
not an overshoot, a non-finite value entered at once), and the per-layer grad norms that went
non-finite while others stayed finite.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from typing import Any

from stethoscope.detect.config import DetectConfig
from stethoscope.findings.catalogue import NAN, resolve_steps
from stethoscope.findings.named_causes import NAN_GREW, NAN_LR_ROSE, NAN_SUDDEN
from stethoscope.records import EVAL_LOSS, GRAD_NORM, LOSS, LR, NAN_ITERS, Finding, StepRecord

WATCHED = (LOSS, GRAD_NORM, EVAL_LOSS)
_HISTORY = 50  # finite records before a NaN that tell an overshoot from a sudden non-finite value
_MIN_HISTORY = 8
_LR_ROSE, _LR_HELD = 1.2, 1.05  # LR before the NaN / its lowest in the window
_GREW, _KEPT = 5.0, 2.0  # the last values before the NaN / their level (median of the window)
_LAYER_PREFIX = GRAD_NORM + "/"
SKIPPED_STEPS = 3  # grad-norm-only non-finite records a loss scaler's overflow skips explain


class NonFiniteDetector:
    """NaN/Inf in the loss, grad norm or eval loss, and Megatron's NaN-iteration counter."""

    name = "nonfinite"

    def __init__(self, config: DetectConfig | None = None) -> None:
        self.config = config or DetectConfig()
        self._open: dict[str, Any] | None = None
        self._last_step: int | None = None
        quiet = self.config.nan_quiet_steps
        self._quiet_steps = quiet if quiet is not None else (resolve_steps(NAN) or 1)
        self._before: deque[tuple[float | None, float | None]] = deque(maxlen=_HISTORY)  # (lr, grad norm or loss)

    def update(self, record: StepRecord) -> list[Finding]:
        bad = self._bad_series(record)
        self._last_step = record.step
        inc = self._open
        if bad:
            return self._on_bad(record, bad)
        self._remember(record.values)
        if inc is None:
            return []
        if record.step - inc["last_bad"] >= self._quiet_steps or record.step < inc["start"]:
            self._open = None
            return [self._follow_up(inc, recovered=True)]
        if any(record.values.get(name) is not None for name in (LOSS, GRAD_NORM)):
            inc["finite_since"] = inc.get("finite_since") or record.step
        return []

    def finish(self) -> list[Finding]:
        inc, self._open = self._open, None
        if inc is None:
            return []
        recovered = inc.get("finite_since") is not None and inc["last_bad"] != self._last_step
        return [self._follow_up(inc, recovered=recovered, final=True)]

    def _remember(self, values: dict[str, float]) -> None:
        lr = values.get(LR)
        self._before.append((lr if lr is not None and math.isfinite(lr) else None, _remember_value(values)))

    def _bad_series(self, record: StepRecord) -> list[str]:
        values = record.values
        bad = [name for name in WATCHED if name in values and not math.isfinite(values[name])]
        nan_iters = values.get(NAN_ITERS)
        if nan_iters is not None and math.isfinite(nan_iters) and nan_iters > 0:
            bad.append(NAN_ITERS)
        return bad

    def _on_bad(self, record: StepRecord, bad: list[str]) -> list[Finding]:
        inc = self._open
        if inc is not None:
            inc["count"] += 1
            inc["last_bad"] = record.step
            inc["finite_since"] = None
            new = [b for b in bad if b not in inc["series"]]
            if not new:
                # a grad-only burst outlasting a scaler's skips: the same key again, now critical
                return [self._opening(inc)] if _grad_only(inc) and inc["count"] == SKIPPED_STEPS + 1 else []
            inc["series"].extend(new)
            inc.setdefault("first", {}).update({b: record.step for b in new})  # a later series: its own step
            inc["values"].update({b: _show(record.values.get(b)) for b in new})
            return [self._opening(inc)]  # same key: the incident now covers more series
        self._open = {
            "start": record.step, "last_bad": record.step, "count": 1, "series": list(bad),
            "values": {b: _show(record.values.get(b)) for b in bad}, "finite_since": None,
            "causes": _before_causes(list(self._before), record),
        }
        self._before.clear()
        return [self._opening(self._open)]

    def _opening(self, inc: dict[str, Any]) -> Finding:
        msg = f"non-finite {_series_at(inc)}"
        if inc["series"] == [NAN_ITERS]:
            msg = f"the log counts NaN iterations in the interval ending at step {inc['start']}"
        ev = {"series": list(inc["series"]), "values": dict(inc["values"]), "count": inc["count"]}
        if inc.get("first"):
            ev["first_steps"] = {b: inc["first"].get(b, inc["start"]) for b in inc["series"]}
        severity = "critical"
        if _grad_only(inc) and inc["count"] <= SKIPPED_STEPS:
            severity = "info"
            msg += (" while the loss stayed finite: an fp16 overflow step a loss scaler skips? (critical if it "
                    f"lasts over {SKIPPED_STEPS} records or the loss follows)")
        return Finding(NAN, severity, inc["start"], msg, evidence=ev, source=self.name,
                       causes=list(inc.get("causes", [])))

    def _follow_up(self, inc: dict[str, Any], recovered: bool, final: bool = False) -> Finding:
        f = self._opening(inc)
        f.end_step = inc["last_bad"]
        span = (f"{inc['count']} non-finite records between steps {inc['start']} and {inc['last_bad']}"
                if inc["last_bad"] != inc["start"] else f"{inc['count']} non-finite record at step {inc['start']}")
        if recovered:
            f.message = f.message.split(" while the loss stayed finite")[0] + f"; {span}, then finite again"
            if _grad_only(inc):
                f.severity = "info" if inc["count"] <= SKIPPED_STEPS else "warning"
                f.message += " (the loss stayed finite: fp16 overflow steps skipped by the loss scaler?)"
        else:
            f.message += f"; {span}; still non-finite at the last record" if final else f"; {span}"
        f.evidence["recovered"] = recovered
        return f

    def state_dict(self) -> dict[str, Any]:
        return {"open": self._open, "last_step": self._last_step}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._open = state.get("open")
        self._last_step = state.get("last_step")


def _series_at(inc: dict[str, Any]) -> str:
    """Each series with the step it first went non-finite: `train/loss, grad/norm at step 150 and eval/loss
    at step 199` (a later series joins the incident at its own step, not the opening's)."""
    first = inc.get("first") or {}
    by_step: dict[int, list[str]] = {}
    for name in inc["series"]:
        by_step.setdefault(first.get(name, inc["start"]), []).append(name)
    return " and ".join(f"{', '.join(names)} at step {step}" for step, names in sorted(by_step.items()))


def _grad_only(inc: dict[str, Any]) -> bool:
    return set(inc["series"]) <= {GRAD_NORM}


def _remember_value(values: dict[str, float]) -> float | None:
    level = values.get(GRAD_NORM, values.get(LOSS))
    return level if level is not None and math.isfinite(level) else None


def _before_causes(before: list[tuple[float | None, float | None]], record: StepRecord) -> list[str]:
    """What the finite records before the first non-finite one say about its cause (see the module docstring)."""
    out = []
    layers = sorted(n.removeprefix(_LAYER_PREFIX) for n, v in record.values.items()
                    if n.startswith(_LAYER_PREFIX) and not math.isfinite(v))
    finite_layers = [n for n, v in record.values.items() if n.startswith(_LAYER_PREFIX) and math.isfinite(v)]
    if layers and finite_layers:
        out.append(f"non-finite gradients first in {', '.join(layers[:3])} (other layers finite at step {record.step})")
    lrs = [lr for lr, _ in before if lr is not None]
    levels = [x for _, x in before if x is not None]
    if len(lrs) < _MIN_HISTORY and len(levels) < _MIN_HISTORY:
        return out
    rise = lrs[-1] / min(lrs) if len(lrs) >= _MIN_HISTORY and min(lrs) > 0 else None
    level = statistics.median(levels[:-3]) if len(levels) >= _MIN_HISTORY else None
    last = max(levels[-3:]) if level is not None else None
    grew = last / level if level and last is not None else None
    if rise is not None and rise >= _LR_ROSE:
        out.append(f"{NAN_LR_ROSE} {rise:.2g}x over the {len(lrs)} records before (to {lrs[-1]:.3g}): the update "
                   "overshoots")
    elif grew is not None and grew >= _GREW:
        out.append(f"the grad norm (or loss) {NAN_GREW} value ({grew:.3g}x its level): an instability building up")
    elif rise is not None and rise <= _LR_HELD and grew is not None and grew <= _KEPT:
        out.append(f"the LR held at {lrs[-1]:.3g} and the grad norm (or loss) at its level up to the step before: "
                   f"{NAN_SUDDEN} (that grows first) but a non-finite value entering at once (a weight or optimizer "
                   "state, the batch, an op such as log/sqrt/division of 0)")
    return out


def _show(value: float | None) -> float | str | None:
    if value is None or math.isfinite(value):
        return value
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
