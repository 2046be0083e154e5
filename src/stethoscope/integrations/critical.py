"""What the adapters do when a run goes bad: stop on a critical finding (`on_critical`) unless automatic
recovery rolls back from it, and never save a non-finite state. Shared by the HF and Lightning callbacks.

The decision is immediate (the live detectors' critical finding, or the step's on-device finite flag); what
the stop says is the incident `run_incidents` computes, as `diagnose` and the alerts say it (act/truth.py):
once, when the run stops, the store made durable and the computation bounded by `STOP_MESSAGE_S`. Past it,
or on any failure, the streaming finding's words, with why."""

from __future__ import annotations

import logging
from typing import Any

from stethoscope.findings.catalogue import NAN

log = logging.getLogger(__name__)

ON_CRITICAL = ("stop", "continue")
STOP_MESSAGE_S = 5.0
"""The most the training thread waits, once, for the stop message's incident (the run is stopping anyway)."""


def check_on_critical(value: str) -> str:
    if value not in ON_CRITICAL:
        raise ValueError(f"on_critical must be one of {', '.join(map(repr, ON_CRITICAL))}, got {value!r}")
    return value


def finite_flag(loss: Any, flag: Any = None) -> Any:
    """An on-device flag, AND-ed over micro-batches: every loss so far finite (no sync)."""
    import torch

    ok = torch.isfinite(loss.detach()).all()
    return ok if flag is None else flag & ok


def is_finite(flag: Any) -> bool:
    """Read a flag made when the loss was produced. By the end of the step that kernel is long done (the
    backward and the optimizer step were queued after it): the read waits for nothing the GPU still has to do."""
    return flag is None or bool(flag)  # host sync: one bool a step, of work already finished


def recovers(monitor: Any, kind: str) -> bool:
    """Whether automatic recovery rolls back from a finding of this type: it is asked to, has not given up and
    has a rollback left (else it would only give up, a step later)."""
    policy = getattr(monitor, "recovery", None)
    return policy is not None and policy.gave_up is None and kind in policy.config.on \
        and len(policy.rollbacks) < policy.config.max_rollbacks


def stop_reason(monitor: Any, finite: bool, step: Any) -> str | None:
    """Why a callback with on_critical="stop" stops now (None: it goes on): a critical finding recovery will not
    handle, or a non-finite loss at this step (seen before the detectors flush) that recovery will not roll back
    from; in the words of the incident `run_incidents` computes for it."""
    f = monitor.control.critical
    if f is not None and not recovers(monitor, f.type):
        return stop_message(monitor, f.type, f.step, f"{_what(f.type, f.step)}: {f.message}")
    if not finite and not recovers(monitor, NAN):
        return stop_message(monitor, NAN, step, f"non-finite loss at step {step}")
    return None


def stop_message(monitor: Any, kind: str, step: Any, streaming: str) -> str:
    """The incident's type, step and message (`act.truth.incident_at`); else `streaming`, saying why."""
    from stethoscope.act.truth import incident_at

    f, why = incident_at(str(monitor.run_dir), monitor.rank, kind, step, STOP_MESSAGE_S, monitor.flush)
    if f is None:
        return f"{streaming} (the streaming finding: {why})"
    return f"{_what(f.type, f.step)}: {f.message}"


def _what(kind: str, step: Any) -> str:
    return f"{kind.replace('_', ' ')} at step {step}"


def log_stop(why: str) -> None:
    log.error("stethoscope: stopping training: %s (on_critical=\"stop\"; resume from the last checkpoint "
              "saved before it, or pass on_critical=\"continue\")", why)


def failed_status(exc: BaseException) -> str:
    """The run's status for an exception that ended it (as `Monitor.__exit__` writes it); Ctrl-C is no failure."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted (KeyboardInterrupt)"
    return f"failed: {type(exc).__name__}: {exc}"
