"""Crash logs and tracebacks → named failures with cause and fix (`stethoscope explain`).

`model` holds the data model (lines, hits, signatures), `lines` and `tracebacks` read the text,
`signatures/` holds the knowledge grouped by failure domain, and `engine` applies it.
"""

from __future__ import annotations

from stethoscope.explain.engine import explain_text

__all__ = ["explain_text"]
