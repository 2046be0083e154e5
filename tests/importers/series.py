"""Reading one metric out of an ImportedRun, for assertions."""

from __future__ import annotations

from stethoscope.importers.base import ImportedRun


def series(run: ImportedRun, name: str) -> dict[int, float]:
    """{step: value} of one metric (the last value wins, as in the store)."""
    return {p.step: p.value for p in run.points if p.name == name}


def names(run: ImportedRun) -> set[str]:
    return {p.name for p in run.points}
