"""What every importer returns, and the Importer protocol.

An importer turns a log that another tool wrote into the same vocabulary the live Monitor records
(`stethoscope.records` metric names), in the log's own step numbering.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from stethoscope.records import Point


@dataclass(slots=True)
class LogLine:
    """A line of a text log that carried no metrics but may matter: an error, a timestamped note.

    `step` is the last step seen before the line (None before any); `time` is unix seconds when the
    line carried a timestamp.
    """

    line: int
    text: str
    step: int | None = None
    time: float | None = None


@dataclass(slots=True)
class ImportedRun:
    """Everything read from one foreign log file."""

    path: str
    format: str
    points: list[Point] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    lines: list[LogLine] = field(default_factory=list)

    @property
    def steps(self) -> int:
        return len({p.step for p in self.points})


class Importer(Protocol):
    """Reads one foreign format. `sniff` looks at the path and the file's first bytes only."""

    name: str

    def sniff(self, path: Path, head: str) -> bool: ...

    def read(self, path: Path) -> ImportedRun: ...


def iter_names(importers: Iterable[Importer]) -> list[str]:
    return [imp.name for imp in importers]
