"""Points collected row by row (or block by block) and turned into `Point` objects in bulk.

A million-iteration log yields several million points, and building them one by one
(`Point(name, step, value)` in a Python loop, with the cyclic GC running) costs ~1 µs each: more than
all the parsing. So importers append raw rows (five list appends), or whole blocks of same-shaped
rows at once, and `PointTable.build` converts and builds columns with C-level loops (`map`, `chain`),
a cache-sized chunk at a time, the GC paused: ~0.3 µs a point. Points come out in the order the rows
were added, so repeated steps of a resumed run stay in the order they were logged.
"""

from __future__ import annotations

import gc
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from itertools import chain, compress, cycle, repeat
from operator import is_not, itemgetter, mul
from typing import NamedTuple

from stethoscope.logtext.columns import Columns
from stethoscope.records import Point

# Point is a frozen slots dataclass without __post_init__; its slot descriptors set a field on a bare
# instance at C speed. tests/importers/test_table.py checks that this still equals Point(...).
_FIELDS = ("name", "step", "value", "time")
_SETTERS = tuple(Point.__dict__[f].__set__ for f in _FIELDS)
_CHUNK_ROWS = 1024
_NAMES = itemgetter(0)
_SCALES = itemgetter(1)


class Layout(NamedTuple):
    """The metric names of one row shape, and optional per-value factors (e.g. 0.001 for ms → s)."""

    names: tuple[str, ...]
    scales: tuple[float, ...] | None = None


class Rejected(NamedTuple):
    """A value that was not a number: where it came from (the importer's line or row), name, text."""

    origin: int
    name: str
    raw: object


Rename = Mapping[str, "str | None"]


class _Rows:
    """Rows of any shapes: five parallel columns."""

    def __init__(self) -> None:
        self.origins: list[int] = []
        self.steps: list[object] = []
        self.times: list[float | None] = []
        self.layouts: list[Layout] = []
        self.values: list[Sequence[object]] = []


class _Block:
    """Rows of one shape, already converted: int steps, float values flattened row by row, times
    (None: none known)."""

    def __init__(self, layout: Layout, origins: list[int], steps: list[int], values: list[float],
                 times: list[float | None] | None) -> None:
        self.layout = layout
        self.origins = origins
        self.steps = steps
        self.values = values
        self.times = times


class PointTable:
    """Rows of (origin, step, time, layout, raw values); `build` returns the Points in row order.

    Raw values may be numbers, str or bytes (`float()` accepts all three); steps may be int, str or
    bytes of an integer. `origin` is the source line (or row) number, used only to name rejects.
    """

    def __init__(self) -> None:
        self._segments: list[_Rows | _Block] = []
        self._new_rows()

    def _new_rows(self) -> None:
        rows = _Rows()
        self._segments.append(rows)
        # Bound once: add_row is the per-line hot path of the text importers.
        self._origins, self._steps, self._times = rows.origins.append, rows.steps.append, rows.times.append
        self._layouts, self._values = rows.layouts.append, rows.values.append

    def __len__(self) -> int:
        return sum(len(segment.steps) for segment in self._segments)

    def add_row(self, origin: int, step: object, time: float | None, layout: Layout,
                values: Sequence[object]) -> None:
        """Append one row; `values` lines up with `layout.names`."""
        self._origins(origin)
        self._steps(step)
        self._times(time)
        self._layouts(layout)
        self._values(values)

    def add(self, origin: int, step: object, time: float | None, name: str, value: object) -> None:
        """Append a single point."""
        self.add_row(origin, step, time, Layout((name,)), (value,))

    def add_values(self, origin: int, step: object, time: float | None, values: Mapping[str, object]) -> None:
        """Append one row given as {name: value}; nothing when it is empty."""
        if values:
            self.add_row(origin, step, time, Layout(tuple(values)), tuple(values.values()))

    def add_block(self, first: int, layout: Layout, rows: Sequence[Sequence[object]], step_at: int,
                  value_at: tuple[int, ...], time_at: int | None = None,
                  time_of: Callable[[object], float | None] | None = None) -> None:
        """Append regex rows (`findall` tuples, one per source line from line `first` on): the step at
        `step_at`, the values at `value_at`, the time (read by `time_of`) at `time_at`; rows with an
        empty step (lines to skip) are left out. Converted here, in C-level passes, while the rows are
        still in the CPU cache."""
        raw_steps = list(map(itemgetter(step_at), rows))
        kept = list(compress(rows, raw_steps))
        pick = itemgetter(*value_at) if len(value_at) > 1 else (lambda row: (row[value_at[0]],))
        origins = list(compress(range(first, first + len(rows)), raw_steps))
        times = None if time_at is None or time_of is None else list(map(time_of, map(itemgetter(time_at), kept)))
        self.add_columns(layout, origins, list(compress(raw_steps, raw_steps)), list(map(pick, kept)), times)

    def add_columns(self, layout: Layout, origins: list[int], steps: list[object],
                    values: list[Sequence[object]], times: list[float | None] | None = None) -> None:
        """Append many rows of one layout at once (`values[i]` lines up with `layout.names`)."""
        try:
            floats = list(map(float, chain.from_iterable(values)))
            ints = list(map(int, steps))
        except (TypeError, ValueError):  # something is not a number: the row path names it
            for row in zip(origins, steps, times or repeat(None), repeat(layout), values):
                self.add_row(*row)
            return
        self._segments.append(_Block(layout, origins, ints, floats, times))
        self._new_rows()

    def build(self, rename: Rename | None = None) -> tuple[list[Point], list[Rejected]]:
        """All points in row order, and the values that were not numbers (left out).

        `rename` maps a name to another, or to None to leave its points out.
        """
        columns, rejected = self.build_columns(rename)
        return make_points(*columns), rejected

    def build_columns(self, rename: Rename | None = None) -> tuple[Columns, list[Rejected]]:
        """Like `build`, as four columns (no Point objects: the cheap form for millions of points)."""
        out = Columns.empty()
        rejected: list[Rejected] = []
        with gc_paused():
            for segment in self._segments:
                for start in range(0, len(segment.steps), _CHUNK_ROWS):
                    rows = slice(start, start + _CHUNK_ROWS)
                    if isinstance(segment, _Block):
                        chunk = _block_chunk(segment, rows, rename)
                    else:
                        chunk = _rows_chunk(segment, rows, rename, rejected)
                    for column, part in zip(out, chunk):
                        column += part
        return out, rejected


def _block_chunk(block: _Block, rows: slice, rename: Rename | None) -> tuple[list, list, list, list]:
    width = len(block.layout.names)
    steps = block.steps[rows]
    names = list(block.layout.names) * len(steps)
    values = block.values[rows.start * width: rows.stop * width]
    if block.layout.scales:
        values = list(map(mul, values, cycle(block.layout.scales)))
    times = (list(chain.from_iterable(map(repeat, block.times[rows], repeat(width)))) if block.times is not None
             else [None] * len(names))
    columns = (names, list(chain.from_iterable(map(repeat, steps, repeat(width)))), values, times)
    return _renamed(columns, rename, None)


def _rows_chunk(segment: _Rows, rows: slice, rename: Rename | None,
               rejected: list[Rejected]) -> tuple[list, list, list, list]:
    layouts = segment.layouts[rows]
    shapes = list(map(_NAMES, layouts))
    counts = list(map(len, shapes))
    names = list(chain.from_iterable(shapes))
    steps = list(chain.from_iterable(map(repeat, map(int, segment.steps[rows]), counts)))
    times = list(chain.from_iterable(map(repeat, segment.times[rows], counts)))
    try:
        values = list(map(float, chain.from_iterable(segment.values[rows])))
        keep = None
    except (TypeError, ValueError):
        values, keep = _numbers_slowly(segment, rows, names, counts, rejected)
    if any(map(_SCALES, layouts)):
        factors = chain.from_iterable(layout.scales or repeat(1.0, n) for layout, n in zip(layouts, counts))
        values = list(map(mul, values, factors))
    return _renamed((names, steps, values, times), rename, keep)


def _renamed(columns: tuple[list, list, list, list], rename: Rename | None,
             keep: list[bool] | None) -> tuple[list, list, list, list]:
    names = columns[0]
    if rename and any(name in rename for name in set(names)):
        names = list(map(rename.get, names, names))
        present = list(map(is_not, names, repeat(None)))
        keep = present if keep is None else list(map(bool.__and__, keep, present))
        columns = (names, *columns[1:])
    if keep is None:
        return columns
    return tuple(list(compress(column, keep)) for column in columns)  # type: ignore[return-value]


def _numbers_slowly(segment: _Rows, rows: slice, names: list[str], counts: list[int],
                    rejected: list[Rejected]) -> tuple[list[float], list[bool]]:
    # Only reached when some value is not a number: one pass with a check per value.
    origins = chain.from_iterable(map(repeat, segment.origins[rows], counts))
    raw = chain.from_iterable(segment.values[rows])
    values: list[float] = []
    keep: list[bool] = []
    for origin, name, item in zip(origins, names, raw):
        number = to_float(item)
        keep.append(number is not None)
        values.append(0.0 if number is None else number)
        if number is None:
            rejected.append(Rejected(origin, name, item))
    return values, keep


def describe(rejected: list[Rejected], where: Callable[[int], str]) -> list[str]:
    """One warning per metric name for values that were not numbers: the first place and a count."""
    first: dict[str, Rejected] = {}
    counts: dict[str, int] = {}
    for r in rejected:
        first.setdefault(r.name, r)
        counts[r.name] = counts.get(r.name, 0) + 1
    out = []
    for name, r in first.items():
        more = f" (and {counts[name] - 1} more)" if counts[name] > 1 else ""
        out.append(f"{where(r.origin)}: {name} value {r.raw!r} is not a number; left out{more}")
    return out


def to_float(item: object) -> float | None:
    """`item` as a float, or None when it is not a number (bools are not numbers here)."""
    if isinstance(item, bool) or item is None:
        return None
    try:
        return float(item)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def make_points(names: list[str], steps: list[int], values: list[float], times: list[float | None]) -> list[Point]:
    """Points from four equally long columns, built column-wise (see the module docstring)."""
    with gc_paused():
        points = list(map(object.__new__, repeat(Point, len(names))))
        for setter, column in zip(_SETTERS, (names, steps, values, times)):
            deque(map(setter, points, column), maxlen=0)
    return points


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while millions of small objects are built (it would rescan them all): on the main
    thread only. The GC is the whole process's: paused from a background thread (an alert settling the run's
    incidents beside training) it would hold the training loop's collections for seconds."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
