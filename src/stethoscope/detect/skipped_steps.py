"""Optimizer steps skipped one after another: an fp16 loss scaler that finds an overflow on every step.

DeepSpeed prints `step=N, skipped=M` every `steps_per_print` steps; `skipped` counts the steps its loss
scaler threw away since the start (an overflow in the scaled gradients: the update is dropped, the scale
halved). A few are routine (the scale probes upward, overflows, comes back). When `skipped` grows by the
interval's whole length record after record, no update reaches the weights at all: the loss stays where it
started and the run learns nothing, whatever its LR. The scale has usually fallen to its floor (1) by then,
and the overflow is in the forward pass itself (an fp16 activation over 65504, a loss that is already inf),
which no loss scale cures. Megatron's `number of skipped iterations: K` (read as `train/skipped_iterations`)
counts the interval's own skips, not a total.

A run that logs its loss scale is left to the loss-scale detector (`detect.amp`: the scale's collapse to its
floor is the same event, dated where the scale fell); this one speaks where only the count is logged (DeepSpeed's
`log_dist` line prints no scale). Reported once a run of such records spans `_MIN_STEPS` steps and
`_MIN_RECORDS` records (`warning`: every update thrown away is a run that cannot learn); the finding grows with
the run, and names the share skipped.
"""

from __future__ import annotations

import math
import re
from typing import Any

from stethoscope.detect.config import DetectConfig
from stethoscope.findings.catalogue import LOSS_SCALE_COLLAPSE, PLATEAU
from stethoscope.records import LOSS, LOSS_SCALE, SKIPPED, Finding, StepRecord

# a total since the start (DeepSpeed's `skipped=`, HF's `skipped_steps`); `train/skipped_iterations` counts per interval
_TOTAL = re.compile(r"^(?:\w+/)?(?:skipped|skipped_steps|num_skipped_steps|total_skipped(?:_steps)?)$", re.IGNORECASE)
_ALL = 0.9  # a record's interval skipped to this share or more: every step skipped (an off-by-one between counters)
_MIN_STEPS = 50  # the stretch of skipped steps reported
_MIN_RECORDS = 3
_REMEDIES = (
    ("an fp16 overflow on every step: the loss scale at its floor and the forward pass itself overflowing "
     "(an activation over fp16's 65504, a loss already inf)",
     "train in bf16 (or fp32) if the hardware has it; else find the layer whose output overflows (a hook "
     "printing each module's max |output|) and scale it down, or lower the LR that grew it"),
    ("a loss scale floor set too high (`min_loss_scale`) or a scaler that cannot lower it",
     "set the DeepSpeed `fp16.min_loss_scale` to 1 and check `initial_scale_power`; log `loss_scale`"),
)


class SkippedStepsDetector:
    """Follows the count of skipped optimizer steps; reports a stretch where every step was skipped."""

    name = "skipped_steps"

    def __init__(self, config: DetectConfig | None = None) -> None:
        self._total: float | None = None  # the last total seen (a counter since the start)
        self._step: int | None = None  # the step of the last record with a count
        self._since: int | None = None  # the first step of the current stretch of all-skipped records
        self._records = 0
        self._skipped = 0.0  # steps skipped in the stretch
        self._first_step: int | None = None  # the run's first record with a count
        self._loss: list[float] = []  # the train loss at the stretch's records (its start and end)
        self._open = False  # the stretch is reported
        self._scaled = False  # the run logs its loss scale: the loss-scale detector (`detect.amp`) owns the story
        self._last = 0  # the last step of the stretch

    def update(self, record: StepRecord) -> list[Finding]:
        if LOSS_SCALE in record.values:
            self._scaled = True
        count, total = None, False
        for name, value in record.values.items():
            if not math.isfinite(value):
                continue
            if name == SKIPPED:
                count = value
                break
            if _TOTAL.match(name):
                count, total = value, True
                break
        if count is None:
            return []
        step = record.step
        if self._first_step is None:
            self._first_step = step
        prev_step, self._step = self._step, step
        if total:
            prev, self._total = self._total, count
            if prev is None or count < prev:  # the first record, or a counter reset by a restart
                skipped, gap = (count, step - 0) if prev is None and count <= step else (0.0, 0)
            else:
                skipped, gap = count - prev, step - (prev_step or 0)
        else:
            skipped, gap = count, step - (prev_step if prev_step is not None else step - 1)
        if gap <= 0:
            return []
        loss = record.values.get(LOSS)
        if skipped >= _ALL * gap:
            if self._since is None:
                self._since, self._records, self._skipped, self._loss = step - gap + 1, 0, 0.0, []
            self._records += 1
            self._skipped += min(skipped, gap)
            if loss is not None and math.isfinite(loss):
                self._loss.append(loss)
            self._last = step
            return self._report(step)
        return self._close()

    def finish(self) -> list[Finding]:
        return self._close()

    def _report(self, step: int) -> list[Finding]:
        since = self._since if self._since is not None else step
        if self._open or self._scaled:
            return []
        if step - since + 1 < _MIN_STEPS or self._records < _MIN_RECORDS:
            return []
        msg = self._message(step)
        self._open = True
        return [self._finding(since, step, msg)]

    def _finding(self, since: int, step: int, msg: str) -> Finding:
        causes, fixes = zip(*_REMEDIES)
        return Finding(LOSS_SCALE_COLLAPSE, "warning", since, msg, end_step=step, evidence=self._evidence(step),
                       source=self.name, symptoms=[{"type": PLATEAU, "step": since}], causes=list(causes),
                       fixes=list(fixes))

    def _message(self, step: int) -> str:
        since = self._since if self._since is not None else step
        loss = (f"; the loss stayed {self._loss[0]:.4g} -> {self._loss[-1]:.4g}" if len(self._loss) >= 2 else "")
        n = int(self._skipped)
        return (f"every optimizer step is being skipped from step {since}: the skipped-steps count grew by the whole "
                f"interval at each of {self._records} records ({n} steps skipped to step {step}){loss}; "
                "the loss scaler drops each update after an fp16 overflow, so the weights never change and the run "
                "cannot learn: this is why the loss does not come down")

    def _evidence(self, step: int) -> dict[str, Any]:
        since = self._since if self._since is not None else step
        ev: dict[str, Any] = {"series": "skipped_steps", "skipped": int(self._skipped), "records": self._records,
                              "from_step": since, "to_step": step,
                              "share_skipped": round(self._skipped / max(1, step - since + 1), 3)}
        if self._loss:
            ev["loss_start"], ev["loss_end"] = self._loss[0], self._loss[-1]
        return ev

    def _close(self) -> list[Finding]:
        """The stretch ended (a record that did update, or the log's end): its reported finding, whole."""
        out = []
        if self._open and self._since is not None:
            out.append(self._finding(self._since, self._last, self._message(self._last)))
        self._since, self._records, self._skipped, self._open, self._loss = None, 0, 0.0, False, []
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"total": self._total, "step": self._step, "since": self._since, "records": self._records,
                "skipped": self._skipped, "first_step": self._first_step, "loss": list(self._loss),
                "open": self._open, "last": self._last, "scaled": self._scaled}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._total, self._step = state.get("total"), state.get("step")
        self._since, self._records = state.get("since"), state.get("records", 0)
        self._skipped, self._first_step = state.get("skipped", 0.0), state.get("first_step")
        self._loss = list(state.get("loss", []))
        self._open, self._last = state.get("open", False), state.get("last", 0)
        self._scaled = state.get("scaled", False)
