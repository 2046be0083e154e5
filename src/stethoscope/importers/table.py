"""Points collected row by row and turned into `Point` objects in bulk.

A million-iteration log yields several million points, and building them one by one
(`Point(name, step, value)` in a Python loop, with the cyclic GC running) costs ~1 µs each: more than
all the parsing. So importers append raw rows (four list appends), and `PointTable.build` converts
and builds whole columns with C-level loops (`map`, `chain`), the GC paused: ~0.3 µs a point.
Points come out in row order, so repeated steps of a resumed run stay in the order they were logged.
"""

from __future__ import annotations

import gc
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from itertools import chain, compress, repeat
from operator import is_not, itemgetter, mul
from typing import NamedTuple

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


class PointTable:
    """Rows of (origin, step, time, layout, raw values); `build` returns the Points in row order.

    Raw values may be numbers, str or bytes (`float()` accepts all three); steps may be int, str or
    bytes of an integer. `origin` is the source line (or row) number, used only to name rejects.
    """

    def __init__(self) -> None:
        self._origins: list[int] = []
        self._steps: list[object] = []
        self._times: list[float | None] = []
        self._layouts: list[Layout] = []
        self._values: list[Sequence[object]] = []

    def __len__(self) -> int:
        return len(self._steps)

    def add_row(self, origin: int, step: object, time: float | None, layout: Layout,
                values: Sequence[object]) -> None:
        """Append one row; `values` lines up with `layout.names`."""
        self._origins.append(origin)
        self._steps.append(step)
        self._times.append(time)
        self._layouts.append(layout)
        self._values.append(values)

    def add(self, origin: int, step: object, time: float | None, name: str, value: object) -> None:
        """Append a single point."""
        self.add_row(origin, step, time, Layout((name,)), (value,))

    def add_values(self, origin: int, step: object, time: float | None, values: Mapping[str, object]) -> None:
        """Append one row given as {name: value}; nothing when it is empty."""
        if values:
            self.add_row(origin, step, time, Layout(tuple(values)), tuple(values.values()))

    def build(self, rename: Mapping[str, str | None] | None = None) -> tuple[list[Point], list[Rejected]]:
        """All points in row order, and the values that were not numbers (left out).

        `rename` maps a name to another, or to None to leave its points out. Rows are converted in
        chunks that stay in the CPU cache: one pass over millions of objects per column costs more.
        """
        points: list[Point] = []
        rejected: list[Rejected] = []
        with gc_paused():
            for start in range(0, len(self._steps), _CHUNK_ROWS):
                rows = slice(start, start + _CHUNK_ROWS)
                points += self._chunk(rows, rename, rejected)
        return points, rejected

    def _chunk(self, rows: slice, rename: Mapping[str, str | None] | None, rejected: list[Rejected]) -> list[Point]:
        layouts = self._layouts[rows]
        shapes = list(map(_NAMES, layouts))
        counts = list(map(len, shapes))
        names = list(chain.from_iterable(shapes))
        steps = list(chain.from_iterable(map(repeat, map(int, self._steps[rows]), counts)))
        times = list(chain.from_iterable(map(repeat, self._times[rows], counts)))
        try:
            values = list(map(float, chain.from_iterable(self._values[rows])))
            keep = None
        except (TypeError, ValueError):
            values, keep = self._numbers_slowly(rows, names, counts, rejected)
        if any(map(_SCALES, layouts)):
            factors = chain.from_iterable(layout.scales or repeat(1.0, n) for layout, n in zip(layouts, counts))
            values = list(map(mul, values, factors))
        if rename:
            names = list(map(rename.get, names, names))
            present = list(map(is_not, names, repeat(None)))
            keep = present if keep is None else list(map(bool.__and__, keep, present))
        if keep is not None:
            names, steps, values, times = (list(compress(col, keep)) for col in (names, steps, values, times))
        return make_points(names, steps, values, times)

    def _numbers_slowly(self, rows: slice, names: list[str], counts: list[int],
                        rejected: list[Rejected]) -> tuple[list[float], list[bool]]:
        # Only reached when some value is not a number: one pass with a check per value.
        origins = chain.from_iterable(map(repeat, self._origins[rows], counts))
        raw = chain.from_iterable(self._values[rows])
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
    """Pause the cyclic GC while millions of small objects are built (it would rescan them all)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
