"""Requests from stethoscope to the training loop, carried out by the loop at a safe point."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from stethoscope.findings.catalogue import DIVERGENCE, NAN
from stethoscope.records import LOSS, Finding, severity_rank


@dataclass
class Control:
    """What the loop is asked to do after this step. Hooks and rules set it; the loop acts on it.

    Modelled on transformers' TrainerControl: stethoscope never steers training by raising.
    """

    checkpoint: bool = False
    """Save a checkpoint now."""

    rollback_to: int | None = None
    """Roll back to the newest good checkpoint at or before this step."""

    resume_step: int | None = None
    """Set with `rollback_to` when the Monitor carried the rollback out (automatic recovery): the step the loop
    continues with (the restored checkpoint's step + 1). Batches to skip: `Monitor.should_skip(step)`."""

    stop: bool = False
    """Stop training cleanly."""

    reasons: list[str] = field(default_factory=list)
    """Why each request was made, for the loop's log."""

    critical: Finding | None = None
    """The first critical finding of the run (a non-finite loss, a divergence), set on the writer thread as soon
    as the live detectors make it; not a request and not cleared: the HF and Lightning callbacks stop on it
    (`on_critical="stop"`) unless automatic recovery rolls back from it."""

    @property
    def rollback(self) -> bool:
        return self.rollback_to is not None

    def request_checkpoint(self, reason: str) -> None:
        self.checkpoint = True
        self.reasons.append(reason)

    def request_stop(self, reason: str) -> None:
        self.stop = True
        self.reasons.append(reason)

    def request_rollback(self, step: int, reason: str) -> None:
        self.rollback_to = step if self.rollback_to is None else min(self.rollback_to, step)
        self.reasons.append(reason)

    def clear(self) -> None:
        self.checkpoint, self.rollback_to, self.resume_step, self.stop = False, None, None, False
        self.reasons.clear()


def is_critical(f: Finding) -> bool:
    """A finding that should stop the run: a non-finite training loss (a NaN grad norm alone may be an fp16
    step the loss scaler skips), or a divergence at error or worse that is still going on."""
    if f.step is None or f.end_step is not None or f.evidence.get("withdrawn") or f.evidence.get("transient"):
        return False
    if f.type == NAN:
        return LOSS in (f.evidence.get("series") or ())
    return f.type == DIVERGENCE and severity_rank(f.severity) >= severity_rank("error")


class CriticalWatch:
    """A stage of the Monitor's observer chain (capture/observers.py): the first critical finding is noted in
    the Control (on the writer thread)."""

    def __init__(self, control: Control) -> None:
        self.control = control

    def see(self, points: Sequence[tuple[str, int, float, Any]], findings: list[Finding]) -> list[Finding]:
        if self.control.critical is None:
            self.control.critical = next((f for f in findings or () if is_critical(f)), None)
        return findings

    def end(self, findings: list[Finding]) -> list[Finding]:
        return findings
