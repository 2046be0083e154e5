"""Live detection: the writer thread's stream of points → step records → the DetectorSet.

Points arrive in step order, a step's values possibly split over two batches; a step is handed to
the detectors once a point of a later step has arrived (one step of lag), and the rest at `finish`.
A value for a step already handed over (rare: a late system sample) is stored but not re-detected.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stethoscope.detect.registry import DetectorSet
from stethoscope.detect.sustained import SustainedGate
from stethoscope.records import INTERNAL_ERRORS, LOSS, QUEUE_DROPS, Finding, StepRecord

_IGNORED = frozenset({QUEUE_DROPS, INTERNAL_ERRORS})


class LiveDetection:
    """An Observer for the record writer (see `record.writer.Observer`)."""

    def __init__(self, detectors: DetectorSet | None = None) -> None:
        self.detectors = detectors if detectors is not None else DetectorSet()
        self._pending: dict[int, StepRecord] = {}
        self._done_through: int | None = None
        self._gate = SustainedGate()  # a divergence graded by the records since its jump, as the views grade it

    def observe(self, points: Sequence[tuple[str, int, float, Any]]) -> list[Finding]:
        out: list[Finding] = []
        pending = self._pending
        for name, step, value, t in points:
            if name == LOSS and self._done_through is not None and step < self._done_through - 1:
                self._done_through = None  # training went back (a rollback): detect the new steps again
            if name in _IGNORED or (self._done_through is not None and step <= self._done_through):
                continue
            rec = pending.get(step)
            if rec is None:
                out += self._release_before(step)
                rec = pending[step] = StepRecord(step, {}, t)
            rec.values[name] = value
        return out

    def _release_before(self, step: int) -> list[Finding]:
        out: list[Finding] = []
        for s in sorted(s for s in self._pending if s < step):
            rec = self._pending.pop(s)
            out += self._gate.update(rec, self.detectors.update(rec))
            self._done_through = s
        return out

    def finish(self) -> list[Finding]:
        out: list[Finding] = []
        for s in sorted(self._pending):
            rec = self._pending.pop(s)
            out += self._gate.update(rec, self.detectors.update(rec))
        return out + self._gate.update(None, self.detectors.finish())

    def state_dict(self) -> dict[str, Any]:
        return {"detectors": self.detectors.state_dict(), "done_through": self._done_through,
                "sustained": self._gate.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.detectors.load_state_dict(state["detectors"])
        self._gate.load_state_dict(state.get("sustained"))
        self._done_through = state.get("done_through")
        self._pending = {}  # steps not handed over yet belong to the path left behind (a rollback, a resume)
