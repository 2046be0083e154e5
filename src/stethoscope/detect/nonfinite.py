"""Non-finite loss, grad norm or eval loss: one critical `nan` finding per incident, at the exact step.

An incident opens at the first non-finite value and folds every later one in until
`nan_quiet_steps` steps pass without any (by default the catalogue's `resolve_steps` for `nan`: a
burst after that is a new incident); its follow-up (same key) gives the end step, the count
and whether the run came back. A grad norm that was non-finite on a few steps while the loss stayed
finite is the loss scaler skipping fp16 overflow steps: the follow-up lowers it to a warning.
"""

from __future__ import annotations

import math
from typing import Any

from stethoscope.detect.config import DetectConfig
from stethoscope.findings.catalogue import resolve_steps
from stethoscope.records import EVAL_LOSS, GRAD_NORM, LOSS, NAN_ITERS, Finding, StepRecord

WATCHED = (LOSS, GRAD_NORM, EVAL_LOSS)


class NonFiniteDetector:
    """NaN/Inf in the loss, grad norm or eval loss, and Megatron's NaN-iteration counter."""

    name = "nonfinite"

    def __init__(self, config: DetectConfig | None = None) -> None:
        self.config = config or DetectConfig()
        self._open: dict[str, Any] | None = None
        self._last_step: int | None = None
        quiet = self.config.nan_quiet_steps
        self._quiet_steps = quiet if quiet is not None else (resolve_steps("nan") or 1)

    def update(self, record: StepRecord) -> list[Finding]:
        bad = self._bad_series(record)
        self._last_step = record.step
        inc = self._open
        if bad:
            return self._on_bad(record, bad)
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
                return []
            inc["series"].extend(new)
            return [self._opening(inc)]  # same key: the incident now covers more series
        self._open = {
            "start": record.step, "last_bad": record.step, "count": 1, "series": list(bad),
            "values": {b: _show(record.values.get(b)) for b in bad}, "finite_since": None,
        }
        return [self._opening(self._open)]

    def _opening(self, inc: dict[str, Any]) -> Finding:
        series = ", ".join(inc["series"])
        msg = f"non-finite {series} at step {inc['start']}"
        if inc["series"] == [NAN_ITERS]:
            msg = f"the log counts NaN iterations in the interval ending at step {inc['start']}"
        ev = {"series": list(inc["series"]), "values": dict(inc["values"]), "count": inc["count"]}
        return Finding("nan", "critical", inc["start"], msg, evidence=ev, source=self.name)

    def _follow_up(self, inc: dict[str, Any], recovered: bool, final: bool = False) -> Finding:
        f = self._opening(inc)
        f.end_step = inc["last_bad"]
        only_grad = set(inc["series"]) <= {GRAD_NORM}
        span = f"{inc['count']} non-finite record(s) between steps {inc['start']} and {inc['last_bad']}"
        if recovered:
            f.message += f"; {span}, then finite again"
            if only_grad:
                f.severity = "warning"
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


def _show(value: float | None) -> float | str | None:
    if value is None or math.isfinite(value):
        return value
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
