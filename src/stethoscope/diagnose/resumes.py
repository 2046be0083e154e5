"""Resumes a text log names in words ("Loaded checkpoint from checkpoints/checkpoint.pth.") while its step counter
goes on forward, so the detectors (which see a resume only when the steps go back, `detect.lr.LrTracker.note_step`)
cannot tell. A loss or grad spike right after such a line that came back is the resume's (a fresh data order, an
optimizer state rebuilt, a first batch of a new session), as it is at a resume the detectors saw: info
(`detect.spike_findings.mark_expected`). A jump that did not come back keeps its severity. A jump at a resume
back to the level the run began at is no expected jump: the resume lost the trained weights
(`weightless_resumes`). Used by `diagnose.engine`."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from typing import Any

import numpy as np

from stethoscope.detect.spike_findings import mark_expected
from stethoscope.findings.catalogue import DIVERGENCE, GRAD_SPIKE, LOSS_SPIKE
from stethoscope.importers.base import LogLine
from stethoscope.records import Finding, severity_rank

# a loading verb and a checkpoint on one line, or "resumed/resuming from/training"; "Checkpoint saved" is not one
_RESUME = re.compile(r"\b(?:load(?:ed|ing)?|restor(?:ed|ing|e)|resum(?:ed|ing|e))\b[^\n]{0,60}\b(?:checkpoint|ckpt)"
                     r"|\bresum(?:ed|ing) (?:from|training)\b", re.IGNORECASE)
_SHARDS = re.compile(r"checkpoint shards", re.IGNORECASE)  # HF loading a pretrained model's weights: no resume


def logged_resumes(lines: Iterable[LogLine]) -> list[int]:
    """The steps after which the log says the run resumed from a checkpoint (the last step seen before the line)."""
    return [ln.step for ln in lines if ln.step is not None and _RESUME.search(ln.text) and not _SHARDS.search(ln.text)]


def at_logged_resumes(findings: list[Finding], lines: Iterable[LogLine], grace: int) -> list[Finding]:
    """Spikes that came back, within `grace` steps after a resume the log names: expected (info), in place."""
    resumes = logged_resumes(lines)
    if not resumes:
        return findings
    for f in findings:
        if f.type not in (LOSS_SPIKE, GRAD_SPIKE) or f.step is None or f.evidence.get("expected") \
                or f.evidence.get("recovered") != "fully":
            continue
        reset = next((r for r in reversed(resumes) if 0 < f.step - r <= grace), None)
        if reset is not None:
            mark_expected(f, reset)
            f.evidence["logged_resume"] = True
    return findings


# -- a resume that did not load the weights ---------------------------------------------------------------
WEIGHTS_NOT_LOADED = "the resume did not load the model weights (or loaded the wrong checkpoint)"
_LOAD_FIX = ("load the model's state_dict (and the optimizer's) from the checkpoint before training resumes, and "
             "check the path it resumes from: the loss should continue where it stopped")
_BACK_SHARE = 0.7  # the loss went back at least this share of the way from where it stood to where the run began
_LEARNED_SHARE = 0.2  # ... of a run that had come down at least this share of its opening level
_EDGE = 5  # records whose median is a level (the run's opening, before the resume, after it)


def session_starts(meta: dict[str, Any], loss_steps: np.ndarray) -> list[int]:
    """The first step of each resumed session of a stored run: a resume whose step counter went on, which no
    detector sees. From the Monitor's resume events (`resume_steps`, one per resume); a store written before them
    gives its last session's only (`resume_time` in its metadata; its Monitor counted `steps` of this session)."""
    recorded = meta.get("resume_steps")
    if isinstance(recorded, list) and recorded:
        first = loss_steps.min() if loss_steps.size else None
        return [int(s) for s in recorded if isinstance(s, int) and first is not None and s > first]
    steps = meta.get("steps")
    n = int(steps) if isinstance(steps, (int, float, str)) and str(steps).isdigit() else 0
    if "resume_time" not in meta or not 0 < n < loss_steps.size:
        return []
    return [int(np.unique(loss_steps)[-n])] if np.unique(loss_steps).size > n else []


def weightless_resumes(findings: list[Finding], loss: tuple[np.ndarray, np.ndarray], resumes: Iterable[int],
                       grace: int) -> list[Finding]:
    """At a resume (the first step after it) where the loss went back to the level the run started from, the
    resume lost the trained weights: a loss jump there, at error, naming that cause (a jump the resume
    rules called expected included): one incident at the resume, owning what the detectors said of the same jump."""
    steps, values = loss
    ok = np.isfinite(values)
    steps, values = steps[ok], values[ok]
    out = list(findings)
    for r in sorted(set(resumes)):
        before, after = values[steps < r], values[steps >= r]
        if before.size < 2 * _EDGE or after.size < 3:
            continue
        start = float(np.median(values[:_EDGE]))
        was, now = float(np.median(before[-_EDGE:])), float(np.median(after[:3]))
        learned = start - was
        if learned < _LEARNED_SHARE * abs(start) or now - was < _BACK_SHARE * learned:
            continue
        ev = {"resume_step": r, "loss_before": was, "loss_after": now, "run_start_level": start,
              "back_share": (now - was) / learned, "weights_not_loaded": True}
        msg = (f"the loss jumped back to where the run began at the resume at step {r} ({was:.4g} -> {now:.4g}; "
               f"the run opened at {start:.4g}): training restarted from untrained weights")
        owned = [f for f in out if f.type in (LOSS_SPIKE, DIVERGENCE) and f.step is not None
                 and r - 1 <= f.step <= r + grace]  # the detectors' words for the same jump: its symptoms
        out = [f for f in out if not any(f is o for o in owned)]
        severity = max(["error", *(f.severity for f in owned)], key=severity_rank)
        out.append(Finding(LOSS_SPIKE, severity, r, msg, evidence=ev, causes=[WEIGHTS_NOT_LOADED], fixes=[_LOAD_FIX],
                           source="resumes", symptoms=[{"type": f.type, "step": f.step} for f in owned]))
    return out
