"""Resumes a text log names in words ("Loaded checkpoint from checkpoints/checkpoint.pth.") while its step counter
goes on forward, so the detectors (which see a resume only when the steps go back, `detect.lr.LrTracker.note_step`)
cannot tell. A loss or grad spike right after such a line that came back is the resume's (a fresh data order, an
optimizer state rebuilt, a first batch of a new session), as it is at a resume the detectors saw: info
(`detect.spike_findings.mark_expected`). A jump that did not come back keeps its severity. Used by
`diagnose.engine`."""

from __future__ import annotations

import re
from collections.abc import Iterable

from stethoscope.detect.spike_findings import mark_expected
from stethoscope.findings.catalogue import GRAD_SPIKE, LOSS_SPIKE
from stethoscope.importers.base import LogLine
from stethoscope.records import Finding

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
