"""The default detectors, the `DetectorSet` fan-out, and how follow-ups and incidents merge.

`DetectorSet` runs every detector on every record, isolates their failures (counted, logged once,
re-raised only when `strict`), and folds findings into open incidents: while a divergence is open,
new loss spikes, grad spikes and further divergences are counted into it instead of being reported
one by one (a divergence is one event, never dozens of spikes). `merge_findings` applies the
supersede rule of `detect.base`: the last finding per (source, type, step) wins, and an escalation
(a grad spike that became an explosion at the same step) replaces what it escalated.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable
from typing import Any

from stethoscope.detect.amp import LossScaleDetector
from stethoscope.detect.base import Detector
from stethoscope.detect.config import DetectConfig
from stethoscope.detect.gradients import GradientDetector
from stethoscope.detect.lr import LrDetector, LrTracker
from stethoscope.detect.memory import MemoryDetector
from stethoscope.detect.nonfinite import NonFiniteDetector
from stethoscope.detect.overfit import OverfitDetector
from stethoscope.detect.spike import SpikeDetector
from stethoscope.detect.throughput import ThroughputDetector
from stethoscope.detect.trend import TrendDetector
from stethoscope.errors import InternalError
from stethoscope.records import Finding, StepRecord

__all__ = ["DetectConfig", "DetectorSet", "default_detectors", "merge_findings"]

log = logging.getLogger(__name__)

FOLDS_INTO = {"divergence": frozenset({"loss_spike", "grad_spike", "divergence"})}
"""Open incident type -> finding types that are folded into it instead of reported."""

ESCALATIONS = {"grad_explosion": "grad_spike"}
"""A finding of the key type replaces one of the value type at the same step (same source)."""

_FOLDED_KEYS = 256


def default_detectors(config: DetectConfig | None = None) -> list[Detector]:
    """A fresh instance of every streaming detector, spikes before trends (so a spike that opens a
    divergence is still reported as the spike it was)."""
    cfg = config or DetectConfig()
    lr = LrTracker(cfg)  # one schedule model, updated once per record, consulted by four detectors
    return [
        NonFiniteDetector(cfg), SpikeDetector(cfg, lr), TrendDetector(cfg, lr), OverfitDetector(cfg),
        GradientDetector(cfg, lr), LossScaleDetector(cfg), ThroughputDetector(cfg), MemoryDetector(cfg),
        LrDetector(cfg, lr),
    ]


def finding_key(f: Finding) -> str:
    """The identity a follow-up shares with the finding it supersedes."""
    return f"{f.source}|{f.type}|{f.step}"


class DetectorSet:
    """Fan-out over detectors with failure isolation, incident folding and saveable state."""

    name = "detectors"

    def __init__(self, detectors: Iterable[Detector] | None = None, config: DetectConfig | None = None,
                 strict: bool = False) -> None:
        self.detectors: list[Detector] = list(detectors) if detectors is not None else default_detectors(config)
        names = [d.name for d in self.detectors]
        if len(set(names)) != len(names):
            raise ValueError(f"detector names must be unique, got {names}")
        self.strict = strict
        self.errors = 0
        self._open: dict[str, dict[str, Any]] = {}  # key of an open folding incident -> {type, step, folded}
        self._emitted: deque[str] = deque(maxlen=4 * _FOLDED_KEYS)
        self._folded: deque[str] = deque(maxlen=_FOLDED_KEYS)

    def update(self, record: StepRecord) -> list[Finding]:
        out: list[Finding] = []
        for d in self.detectors:
            try:
                found = d.update(record)
            except Exception as exc:  # never crash the run: count, log the first, re-raise when strict
                self._failed(d, exc)
                continue
            if found:
                out.extend(self._fold(found))
        return out

    def finish(self) -> list[Finding]:
        """End of the run: every detector closes its open incidents (follow-ups with end steps)."""
        out: list[Finding] = []
        for d in self.detectors:
            fin = getattr(d, "finish", None)
            if fin is None:
                continue
            try:
                out.extend(self._fold(fin()))
            except Exception as exc:
                self._failed(d, exc)
        return out

    def _failed(self, d: Detector, exc: Exception) -> None:
        self.errors += 1
        if self.strict:
            raise InternalError(f"detector {d.name!r} failed: {exc}") from exc
        if self.errors == 1:
            log.exception("detector %r failed (further failures are only counted)", d.name)

    # -- incident folding -------------------------------------------------------------------------
    def _fold(self, found: list[Finding]) -> list[Finding]:
        out = []
        for f in found:
            key = finding_key(f)
            if key in self._folded:
                continue  # a follow-up of something already folded
            if key not in self._emitted and self._container_for(f) is not None:
                self._folded.append(key)
                self._open[self._container_for(f)]["folded"] += 1  # type: ignore[index]
                continue
            if key not in self._emitted:
                self._emitted.append(key)
            self._track(f, key)
            out.append(f)
        return out

    def _container_for(self, f: Finding) -> str | None:
        for key, inc in self._open.items():
            if f.type not in FOLDS_INTO[inc["type"]] or f.step is None:
                continue
            if f.type == inc["type"] or f.step >= inc["step"]:  # one divergence, whichever saw it first
                return key
        return None

    def _track(self, f: Finding, key: str) -> None:
        if f.type not in FOLDS_INTO:
            return
        inc = self._open.get(key)
        if inc is not None and inc["folded"]:
            f.evidence["folded_findings"] = inc["folded"]
        if f.end_step is None:
            self._open.setdefault(key, {"type": f.type, "step": f.step, "folded": 0})
        else:
            self._open.pop(key, None)

    # -- state ------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "detectors": {d.name: d.state_dict() for d in self.detectors},
            "open": self._open, "emitted": list(self._emitted), "folded": list(self._folded),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        saved = state.get("detectors", {})
        for d in self.detectors:
            if d.name in saved:
                d.load_state_dict(saved[d.name])
        self._open = dict(state.get("open", {}))
        self._emitted = deque(state.get("emitted", []), maxlen=4 * _FOLDED_KEYS)
        self._folded = deque(state.get("folded", []), maxlen=_FOLDED_KEYS)


def merge_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Apply the supersede rule: the last finding per key wins, in the order keys first appeared;
    an escalation replaces the finding it escalated (same source and step)."""
    merged: dict[str, Finding] = {}
    for f in findings:
        merged[finding_key(f)] = f
    for f in list(merged.values()):
        lower = ESCALATIONS.get(f.type)
        if lower is not None:
            merged.pop(f"{f.source}|{lower}|{f.step}", None)
    return list(merged.values())
