"""Requests from stethoscope to the training loop, carried out by the loop at a safe point."""

from __future__ import annotations

from dataclasses import dataclass, field


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
