"""What the text-log engine reads a log into: points as columns (`Columns`), the lines worth keeping
(`LogLine`) and the run that holds them (`ImportedRun`, what every importer returns).

A reader turns a log that another tool wrote into the same vocabulary the live Monitor records
(`stethoscope.records` metric names), in the log's own step numbering.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import TYPE_CHECKING, Any, NamedTuple

from stethoscope.records import Point

if TYPE_CHECKING:
    from stethoscope.logtext.coded import CodedColumns


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


class Columns(NamedTuple):
    """Points as four equally long columns, in the order they were logged (cheap for millions)."""

    names: list[str]
    steps: list[int]
    values: list[float]
    times: list[float | None]

    @classmethod
    def empty(cls) -> Columns:
        return cls([], [], [], [])

    @property
    def size(self) -> int:
        return len(self.names)

    @property
    def last_time(self) -> float | None:
        return self.times[-1] if self.times else None

    def distinct_steps(self) -> int:
        return len(set(self.steps))

    def add_rows(self, names: Sequence[str], steps: list[int], values: list[list[float]],
                 times: list[float] | None) -> None:
        """Append rows of one layout given a column of values per name: the points of a row in `names`'
        order, rows in order (C-level slice copies, no Python loop per point)."""
        width, n = len(names), len(steps)
        if width == 1:  # a record line of one metric (Composer): no interleaving
            self.names.extend(repeat(names[0], n))
            self.steps.extend(steps)
            self.values.extend(values[0])
            self.times.extend(repeat(None, n) if times is None else times)
            return
        flat: list[Any] = [None] * (n * width)
        for at, column in enumerate(values):
            flat[at::width] = column
        self.names.extend(list(names) * n)
        self.steps.extend(_repeated(steps, width))
        self.values.extend(flat)
        self.times.extend(repeat(None, n * width) if times is None else _repeated(times, width))

    @classmethod
    def of(cls, points: Iterable[Point]) -> Columns:
        cols = cls.empty()
        for p in points:
            cols.names.append(p.name)
            cols.steps.append(p.step)
            cols.values.append(p.value)
            cols.times.append(p.time)
        return cols


class ImportedRun:
    """Everything read from one foreign log file.

    Points are held as `columns` (what importers build and diagnosis reads: `Columns`, or the
    `coded.CodedColumns` of a big log); `points` builds Point objects from them on first use. Pass
    either `points` or `columns`.
    """

    __slots__ = ("path", "format", "meta", "warnings", "lines", "_points", "_columns")

    def __init__(self, path: str, format: str, points: list[Point] | None = None,
                 meta: dict[str, Any] | None = None, warnings: list[str] | None = None,
                 lines: list[LogLine] | None = None, columns: Columns | CodedColumns | None = None) -> None:
        self.path = path
        self.format = format
        self.meta: dict[str, Any] = {} if meta is None else meta
        self.warnings: list[str] = [] if warnings is None else warnings
        self.lines: list[LogLine] = [] if lines is None else lines
        self._points = points
        self._columns = columns if columns is not None or points is not None else Columns.empty()

    @property
    def columns(self) -> Columns | CodedColumns:
        if self._columns is None:
            self._columns = Columns.of(self._points or [])
        return self._columns

    @property
    def points(self) -> list[Point]:
        if self._points is None:
            from stethoscope.logtext.table import make_points

            self._points = make_points(*self.columns)
        return self._points

    @property
    def n_points(self) -> int:
        return len(self._points) if self._points is not None else self.columns.size

    @property
    def steps(self) -> int:
        return self.columns.distinct_steps()

    def __repr__(self) -> str:
        return f"ImportedRun({self.path!r}, {self.format!r}, {self.n_points} points)"


def _repeated(items: list[Any], width: int) -> list[Any]:
    """Each item `width` times in a row, by C-level slice copies."""
    out: list[Any] = [None] * (len(items) * width)
    for at in range(width):
        out[at::width] = items
    return out
