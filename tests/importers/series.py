"""Reading one metric out of an ImportedRun, for assertions; reading a log's text as `diagnose` does."""

from __future__ import annotations

import tempfile
from pathlib import Path

from stethoscope.importers import read_any
from stethoscope.importers.base import ImportedRun


def read_text(text: str) -> ImportedRun:
    """The one run `read_any` reads from `text` written to a file `train.log`."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "train.log"
        path.write_text(text)
        (run,) = read_any(path)
    return run


def read_bytes(data: bytes, name: str = "train.log") -> list[ImportedRun]:
    """The runs `read_any` reads from `data` written to a file named `name`."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / name
        path.write_bytes(data)
        return read_any(path)


def series(run: ImportedRun, name: str) -> dict[int, float]:
    """{step: value} of one metric (the last value wins, as in the store)."""
    return {p.step: p.value for p in run.points if p.name == name}


def names(run: ImportedRun) -> set[str]:
    return {p.name for p in run.points}
