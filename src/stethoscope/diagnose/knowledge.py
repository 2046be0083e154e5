"""Moved to `stethoscope.findings.advice` (the advice belongs with the finding types it answers); this name is
kept so that callers of `stethoscope.diagnose.knowledge` do not break."""

from __future__ import annotations

from stethoscope.findings.advice import ADVICE, CONDITIONAL, NON_PROBLEMS, advise, context_flags, reconcile

__all__ = ["ADVICE", "CONDITIONAL", "NON_PROBLEMS", "advise", "context_flags", "reconcile"]
