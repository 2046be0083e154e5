"""The Monitor's own work after a step: checkpoint saves and rollbacks, and what they cost.

Their time is taken out of the next step's `perf/step_time_s` (a save every N steps would read as a
periodic stall of the training) and recorded beside it as `perf/checkpoint_s`. The hang watchdog does not
count a save or a rollback as a stuck step.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from stethoscope.capture.control import Control
from stethoscope.capture.timing import StepTiming


class OwnWork:
    """Runs the checkpoint manager and the recovery policy after each step, on the training thread."""

    def __init__(self, checkpoints: Any, recovery: Any, probe: Any, timing: StepTiming) -> None:
        self.checkpoints, self.recovery, self.probe, self.timing = checkpoints, recovery, probe, timing
        self._seconds = 0.0  # spent since the last step, not yet recorded

    def after_step(self, step: int, metrics: dict[str, Any], control: Control, loss: Any = None) -> None:
        t0 = time.perf_counter()
        try:
            with self.probe.paused() if self.probe is not None else contextlib.nullcontext():
                if self.checkpoints is not None:  # saves when due; on SIGTERM saves and exits (SystemExit)
                    self.checkpoints.note(metrics)
                    self.checkpoints.after_step(step, control, loss)
                if self.recovery is not None:  # a rollback asked for by the writer thread is carried out here
                    self.recovery.after_step(step, control)
        finally:
            spent = time.perf_counter() - t0
            self.timing.exclude(spent)
            self._seconds += spent

    def take(self) -> float:
        """The seconds spent since the last call (0.0: none), for the next step's `perf/checkpoint_s`."""
        seconds, self._seconds = self._seconds, 0.0
        return seconds
