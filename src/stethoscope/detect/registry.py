"""The default detectors, the `DetectorSet` fan-out, and how follow-ups and incidents merge.

`DetectorSet` updates the shared LR-schedule context once per record, runs every detector on the
record, isolates their failures (counted, logged once, re-raised only when `strict`), and passes what
they found through an `IncidentBook` (`findings.incidents`): a divergence owns the spikes, explosions
and NaNs inside it instead of reporting them one by one. `merge_findings` applies the supersede rule
of `detect.base`: the last finding per (source, type, step) wins, and an escalation (a grad spike that
became an explosion at the same step) replaces what it escalated.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from stethoscope.detect.amp import LossScaleDetector
from stethoscope.detect.base import Detector
from stethoscope.detect.chance import ChanceLevelDetector
from stethoscope.detect.config import DetectConfig
from stethoscope.detect.gpu import GpuHealthDetector
from stethoscope.detect.gradients import GradientDetector
from stethoscope.detect.lr import LrDetector, LrTracker
from stethoscope.detect.memory import MemoryDetector
from stethoscope.detect.nonfinite import NonFiniteDetector
from stethoscope.detect.nonfinite_terms import NonFiniteTermsDetector
from stethoscope.detect.overfit import OverfitDetector
from stethoscope.detect.overfit_quality import HeldOutQuality
from stethoscope.detect.reward import RewardDetector
from stethoscope.detect.skipped_steps import SkippedStepsDetector
from stethoscope.detect.spike import SpikeDetector
from stethoscope.detect.throughput import ThroughputDetector
from stethoscope.detect.trend import TrendDetector
from stethoscope.detect.trend_findings import contradicted
from stethoscope.errors import InternalError
from stethoscope.findings.catalogue import DIVERGENCE, LOSS_SPIKE
from stethoscope.findings.incidents import IncidentBook
from stethoscope.findings.pipeline import merge_findings
from stethoscope.records import Finding, StepRecord

__all__ = ["DetectConfig", "DetectorSet", "default_detectors", "merge_findings"]

log = logging.getLogger(__name__)

def default_detectors(config: DetectConfig | None = None, schedule: LrTracker | None = None,
                      quality: HeldOutQuality | None = None) -> list[Detector]:
    """A fresh instance of every streaming detector, spikes before trends (a spike is known before the
    divergence it opens), sharing one LR-schedule model (`schedule`, new when not given) and one record of
    the evals' quality metrics (`quality`: accuracy, mAP ..., fed by the overfit detector)."""
    cfg = config or DetectConfig()
    lr = schedule if schedule is not None else LrTracker(cfg)
    return [
        NonFiniteDetector(cfg), SpikeDetector(cfg, lr), TrendDetector(cfg, lr), OverfitDetector(cfg, quality),
        GradientDetector(cfg, lr), LossScaleDetector(cfg), ThroughputDetector(cfg), MemoryDetector(cfg),
        LrDetector(cfg, lr), GpuHealthDetector(cfg), ChanceLevelDetector(cfg), SkippedStepsDetector(cfg),
        RewardDetector(cfg), NonFiniteTermsDetector(cfg),
    ]


class DetectorSet:
    """Fan-out over detectors with failure isolation, incident folding and saveable state."""

    name = "detectors"

    def __init__(self, detectors: Iterable[Detector] | None = None, config: DetectConfig | None = None,
                 strict: bool = False) -> None:
        cfg = config or DetectConfig()
        self.config = cfg
        """The thresholds the default detectors were built with (recorded in the run's metadata)."""
        self.schedule: LrTracker | None = None  # the schedule context, updated once per record, here
        self.quality: HeldOutQuality | None = None  # the evals' accuracy/mAP: a loss rise they contradict is info
        if detectors is None:
            self.schedule, self.quality = LrTracker(cfg), HeldOutQuality()
            detectors = default_detectors(cfg, self.schedule, self.quality)
        self.detectors: list[Detector] = list(detectors)
        names = [d.name for d in self.detectors]
        if len(set(names)) != len(names):
            raise ValueError(f"detector names must be unique, got {names}")
        self.strict = strict
        self.errors = 0
        self.incidents = IncidentBook(cfg.lead_steps)

    def update(self, record: StepRecord) -> list[Finding]:
        out: list[Finding] = []
        if self.schedule is not None:
            try:
                self.schedule.observe(record)  # the detectors that consult it see this record's state
            except Exception as exc:
                self._failed("lr schedule", exc)
        for d in self.detectors:
            try:
                found = d.update(record)
            except Exception as exc:  # never crash the run: count, log the first, re-raise when strict
                self._failed(d.name, exc)
                continue
            if found:
                out.extend(self.incidents.process(found))
        return out

    def finish(self) -> list[Finding]:
        """End of the run: every detector closes its open incidents (follow-ups with end steps)."""
        out: list[Finding] = []
        for d in self.detectors:
            fin = getattr(d, "finish", None)  # part of the protocol; a user's older detector may lack it
            if fin is None:
                continue
            try:
                # before the incident book (what it owns) and after (the symptoms a withdrawn root releases)
                out.extend(self._contradicted(self.incidents.process(self._contradicted(fin()))))
            except Exception as exc:
                self._failed(d.name, exc)
        return out

    def _contradicted(self, found: list[Finding]) -> list[Finding]:
        """A divergence through which an eval quality metric kept improving, and the loss spike that opened it,
        are the objective's rise (`detect.trend_findings.contradicted`): info, at the run's end, when the evals
        are known."""
        if self.quality is None or not found:
            return found
        lead = self.config.lead_steps
        out = list(found)
        starts = []
        for i, f in enumerate(out):
            if f.type == DIVERGENCE and f.severity != "info" and f.step is not None:
                better = self.quality.improving_through(f.step)
                if better is not None:
                    out[i] = contradicted(f, better)
                    starts.append((f.step, better))
        for i, f in enumerate(out):
            near = next((b for s, b in starts if f.step is not None and abs(f.step - s) <= lead), None)
            if f.type == LOSS_SPIKE and f.severity != "info" and near is not None:
                out[i] = contradicted(f, near)
        return out

    def _failed(self, name: str, exc: Exception) -> None:
        self.errors += 1
        if self.strict:
            raise InternalError(f"detector {name!r} failed: {exc}") from exc
        if self.errors == 1:
            log.exception("detector %r failed (further failures are only counted)", name)

    # -- state ------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "detectors": {d.name: d.state_dict() for d in self.detectors},
            "incidents": self.incidents.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        saved = state.get("detectors", {})
        for d in self.detectors:
            if d.name in saved:
                d.load_state_dict(saved[d.name])
        self.incidents.load_state_dict(state.get("incidents", {}))
