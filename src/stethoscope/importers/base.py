"""What every importer returns, and the Importer protocol.

An importer turns a log that another tool wrote into the same vocabulary the live Monitor records
(`stethoscope.records` metric names), in the log's own step numbering. The run and its columns are the
text-log engine's (`stethoscope.logtext.columns`), named here too for the importers.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from stethoscope.logtext.columns import Columns, ImportedRun, LogLine

__all__ = ["Columns", "ImportedRun", "Importer", "LogLine", "iter_names"]


class Importer(Protocol):
    """Reads one foreign format. `sniff` looks at the path and the file's first bytes only."""

    name: str

    def sniff(self, path: Path, head: str) -> bool: ...

    def read(self, path: Path) -> ImportedRun: ...


def iter_names(importers: Iterable[Importer]) -> list[str]:
    return [imp.name for imp in importers]
