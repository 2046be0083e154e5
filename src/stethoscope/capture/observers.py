"""The Monitor's observer chain: who sees each batch of durable points on the writer thread, and in what order.

The record writer (`record.writer.Recorder`) hands every durable batch to one `ObserverChain`. Its stages
run in the order of one list, each given the points and the findings the stages before it passed on:

    detection  the live detectors make findings from the points        (detect/live.py, `DetectionStage`)
    probe      the probe's own findings join them: hangs, stragglers    (probe/live.py, `FindingInbox`)
    alerts     the rules turn the findings into deliveries              (act/live.py, `LiveAlerts`)
    recovery   the policy asks for a rollback (the loop carries it out) (act/recovery.py, `RecoveryPolicy`)
    critical   the first critical finding is noted in the Control       (capture/control.py, `CriticalWatch`)
    exports    the points and every finding go to other tools           (exporters/live.py, `LiveExport`)

A stage not asked for is left out; without the detectors only the exports remain. What the chain returns
is what the writer stores as the batch's findings. A stage that raises passes on the findings it was
given, the stages after it still run (an exporter still gets the points), and the first failure is
raised at the end for the writer to count (`stethoscope/internal_errors`; strict re-raises).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from stethoscope.capture.control import Control, CriticalWatch
from stethoscope.records import Finding

Points = Sequence[tuple[str, int, float, Any]]


class Stage(Protocol):
    """One stage of the chain: sees a batch and the findings so far, returns the findings for the next."""

    def see(self, points: Points, findings: list[Finding]) -> list[Finding]: ...

    def end(self, findings: list[Finding]) -> list[Finding]: ...


class DetectionStage:
    """The live detectors (`detect.live.LiveDetection`) as the chain's first stage."""

    def __init__(self, detection: Any) -> None:
        self.detection = detection

    def see(self, points: Points, findings: list[Finding]) -> list[Finding]:
        return findings + (self.detection.observe(points) or [])

    def end(self, findings: list[Finding]) -> list[Finding]:
        return findings + (self.detection.finish() or [])


class ObserverChain:
    """The writer's one Observer (`observe(points)`, `finish()`): the stages, in the order of `stages`."""

    def __init__(self, stages: Sequence[Stage]) -> None:
        self.stages = list(stages)

    def observe(self, points: Points) -> list[Finding]:
        return self._run(lambda stage, found: stage.see(points, found))

    def finish(self) -> list[Finding]:
        return self._run(lambda stage, found: stage.end(found))

    def _run(self, call: Callable[[Stage, list[Finding]], list[Finding]]) -> list[Finding]:
        findings: list[Finding] = []
        failure: Exception | None = None
        for stage in self.stages:
            try:
                findings = call(stage, findings)
            except Exception as exc:  # noqa: BLE001 - raised below, once every stage has had the batch
                failure = failure or exc
        if failure is not None:
            raise failure
        return findings


def observer_chain(detection: Any, control: Control, *, probe: Any = None, alerts: Any = None,
                   recovery: Any = None, exports: Any = None) -> ObserverChain | None:
    """The chain in the order the module docstring gives; None when there is nothing to observe."""
    stages: list[Stage] = []
    if detection is not None:
        stages.append(DetectionStage(detection))
        if probe is not None:
            stages.append(probe.finding_stage())
        stages += [stage for stage in (alerts, recovery) if stage is not None]
        stages.append(CriticalWatch(control))
    if exports is not None:
        stages.append(exports)
    return ObserverChain(stages) if stages else None
