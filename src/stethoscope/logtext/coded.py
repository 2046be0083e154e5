"""Points as numpy columns: what the readers of big logs build, with no Python object per point.

A million-step log holds several million points. As Python lists (`Columns`) they cost ~0.3 µs a point
to build and as much again for diagnosis to turn back into arrays; `CodedColumns` keeps each point's
name as a code into a short list of labels and its step and value in numpy arrays, which the step x
series table (`diagnose.table`) pivots directly. The list form is built on first use, equal to what
the list-building path gives (tests/importers/test_coded.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import chain, repeat
from typing import Any, Union

import numpy as np

from stethoscope.logtext.columns import Columns

_ARGMAX_LABELS = 64  # up to this many labels, first appearances are found one label at a time


class CodedColumns:
    """Points in log order: `codes` index `labels` (the names), `step_array` (int64), `value_array`
    (float64), `time_list` (unix seconds or None per point, a list, or a float64 array with NaN for None;
    None when no point has a time).
    `ordered`: the labels are distinct, each is used, and in order of first appearance (what the
    constructors below build), so `first_seen` has nothing to do."""

    __slots__ = ("labels", "codes", "step_array", "value_array", "time_list", "ordered", "_lists", "_last_time")

    def __init__(self, labels: Sequence[str], codes: np.ndarray, steps: np.ndarray, values: np.ndarray,
                 times: list[float | None] | np.ndarray | None = None, ordered: bool = False,
                 last_time: float | None = None) -> None:
        self.labels = list(labels)
        self.codes = codes
        self.step_array = steps
        self.value_array = values
        self.time_list = times
        self.ordered = ordered
        self._lists: Columns | None = None
        self._last_time = last_time  # the last point's time when `times` is not kept per point

    @classmethod
    def of_rows(cls, names: Sequence[str], steps: np.ndarray, values: np.ndarray,
                times: list[float | None] | None = None) -> CodedColumns:
        """Rows of one layout: `values` is (rows x len(names)), `times` one per row (or None)."""
        width = len(names)
        codes = np.tile(np.arange(width, dtype=np.int32), steps.size)
        if times is None:
            per_point = None
        elif isinstance(times, np.ndarray):
            per_point = np.repeat(times.astype(np.float64), width)
        else:
            per_point = list(chain.from_iterable(map(repeat, times, repeat(width))))
        return cls(names, codes, np.repeat(steps, width), values.reshape(-1), per_point,
                   ordered=steps.size > 0 and len(set(names)) == width)

    @property
    def size(self) -> int:
        return int(self.codes.size)

    @property
    def last_time(self) -> float | None:
        if self.time_list is None or not len(self.time_list):
            return self._last_time
        last = self.time_list[-1]
        return None if last is None or last != last else float(last)

    def distinct_steps(self) -> int:
        steps = self.step_array
        if steps.size < 2:
            return int(steps.size)
        change = steps[1:] != steps[:-1]
        if bool(np.all(steps[1:] >= steps[:-1])):  # in step order, as logs nearly always are: no sort
            return 1 + int(np.count_nonzero(change))
        return int(np.unique(steps).size)

    def first_seen(self) -> tuple[list[str], np.ndarray]:
        """The distinct names in order of first appearance, and each point's index into them."""
        if self.ordered:
            return self.labels, self.codes
        counts = np.bincount(self.codes, minlength=len(self.labels)) if self.codes.size else np.zeros(0, int)
        used = np.flatnonzero(counts)
        if used.size <= _ARGMAX_LABELS:
            firsts = np.array([int(np.argmax(self.codes == c)) for c in used.tolist()], dtype=np.int64)
        else:
            firsts = np.full(len(self.labels), self.codes.size, dtype=np.int64)
            np.minimum.at(firsts, self.codes, np.arange(self.codes.size))
            firsts = firsts[used]
        names: list[str] = []
        index: dict[str, int] = {}
        remap = np.zeros(len(self.labels), dtype=np.int64)
        for code in used[np.argsort(firsts, kind="stable")].tolist():
            remap[code] = index.setdefault(self.labels[code], len(names))
            if len(index) > len(names):
                names.append(self.labels[code])
        return names, remap[self.codes]

    # -- the list form, for everything that reads points one by one ------------------------------------
    @property
    def names(self) -> list[str]:
        return self.lists().names

    @property
    def steps(self) -> list[int]:
        return self.lists().steps

    @property
    def values(self) -> list[float]:
        return self.lists().values

    @property
    def times(self) -> list[float | None]:
        return self.lists().times

    def lists(self) -> Columns:
        if self._lists is None:
            labels = np.empty(len(self.labels), dtype=object)
            labels[:] = self.labels
            times = _time_list(self.time_list) if self.time_list is not None else [None] * self.size
            self._lists = Columns(labels[self.codes].tolist(), self.step_array.tolist(),
                                  self.value_array.tolist(), list(times))
        return self._lists

    def __iter__(self) -> Iterator[list[Any]]:
        return iter(self.lists())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, (Columns, CodedColumns)) and tuple(self) == tuple(other)

    __hash__ = None  # type: ignore[assignment]


class RowBlock:
    """Rows of one layout not yet laid out as points: `steps` (rows), `columns` (one float64 array per
    name), `times` (rows, NaN for none) or None. `join` writes them straight into its output arrays (no
    points-sized temporaries per block); anything else takes `coded()`."""

    __slots__ = ("names", "steps", "columns", "times")

    def __init__(self, names: Sequence[str], steps: np.ndarray, columns: list[np.ndarray],
                 times: np.ndarray | None) -> None:
        self.names, self.steps, self.columns, self.times = list(names), steps, columns, times

    @property
    def size(self) -> int:
        return int(self.steps.size) * len(self.names)

    @property
    def ordered(self) -> bool:
        return self.steps.size > 0 and len(set(self.names)) == len(self.names)

    def coded(self) -> CodedColumns:
        table = np.stack(self.columns, axis=1) if self.columns else np.zeros((self.steps.size, 0))
        return CodedColumns.of_rows(self.names, self.steps, table, self.times)

    def fill(self, codes: np.ndarray, steps: np.ndarray, values: np.ndarray, times: np.ndarray | None,
             remap: np.ndarray) -> None:
        """Lay the points out into slices of `join`'s output (rows x names views, by broadcasting)."""
        shape = (self.steps.size, len(self.names))
        codes.reshape(shape)[:] = remap
        steps.reshape(shape)[:] = self.steps[:, None]
        grid = values.reshape(shape)
        for at, column in enumerate(self.columns):
            grid[:, at] = column
        if times is not None:
            times.reshape(shape)[:] = (np.nan if self.times is None else self.times[:, None])


AnyColumns = Union[Columns, CodedColumns]


def rows_of(names: Sequence[str], steps: list[int], values: list[list[float]],
            times: list[float | None] | None) -> RowBlock | None:
    """Rows of one layout given a column of values per name; None when a step does not fit in 64 bits."""
    try:
        step_array = np.asarray(steps, dtype=np.int64)
    except OverflowError:
        return None
    columns = [np.asarray(column, dtype=np.float64) for column in values]
    time_array = None if times is None else np.array(times, dtype=np.float64)  # None: NaN
    return RowBlock(names, step_array, columns, time_array)


def encode(columns: AnyColumns) -> CodedColumns:
    """Any columns as CodedColumns (list columns are converted: names by a dict, numbers by numpy)."""
    if isinstance(columns, CodedColumns):
        return columns
    index: dict[str, int] = {}
    codes = np.fromiter(map(index.setdefault, columns.names, map(len, repeat(index))), dtype=np.int32,
                        count=len(columns.names))
    times = columns.times if any(t is not None for t in columns.times) else None
    try:
        steps = np.array(columns.steps, dtype=np.int64)
    except OverflowError:
        big = next(s for s in columns.steps if not -2**63 <= s < 2**63)
        raise OverflowError(f"a step counter of {big} does not fit in 64 bits (a step below 2**63 was expected)") from None
    return CodedColumns(list(index), codes, steps,
                        np.array(columns.values, dtype=np.float64), times, ordered=True)


def join(parts: Sequence[AnyColumns]) -> AnyColumns:
    """The parts one after the other: list columns when every part is one (extended in place: the first
    part is not copied), else CodedColumns."""
    if not parts:
        return Columns.empty()
    if all(isinstance(part, Columns) for part in parts):
        out = parts[0]
        for part in parts[1:]:
            for column, piece in zip(out, part):
                column += piece
        return out
    if any(isinstance(part, RowBlock) for part in parts):
        return _filled([part for part in parts if part.size])
    coded = [encode(part) for part in parts if part.size]
    if len(coded) <= 1:
        return coded[0] if coded else Columns.empty()
    labels: dict[str, int] = {}
    codes = []
    for part in coded:
        remap = np.array([labels.setdefault(name, len(labels)) for name in part.labels], dtype=np.int32)
        codes.append(remap[part.codes])
    times: list[float | None] | np.ndarray | None = None
    if any(isinstance(part.time_list, np.ndarray) for part in coded):  # an array of them all (None: NaN)
        times = np.concatenate([np.full(part.size, np.nan) if part.time_list is None
                                else np.array(part.time_list, dtype=np.float64) for part in coded])
    elif any(part.time_list is not None for part in coded):
        times = [t for part in coded for t in (part.time_list or repeat(None, part.size))]
    return CodedColumns(list(labels), np.concatenate(codes), np.concatenate([p.step_array for p in coded]),
                        np.concatenate([p.value_array for p in coded]), times,
                        ordered=all(part.ordered for part in coded))


def _time_list(times: list[float | None] | np.ndarray) -> list[float | None]:
    """Times as a list (an array's NaN: None)."""
    if isinstance(times, np.ndarray):
        return [None if t != t else t for t in times.tolist()]
    return times


def _filled(parts: list[Any]) -> CodedColumns:
    """`join` of parts among which RowBlocks: one output array per column, each part written into its slice
    (a RowBlock by broadcasting, without laying its points out first). Times, when any part has them, as
    a float64 array (NaN: none)."""
    if len(parts) == 1 and isinstance(parts[0], RowBlock):
        return parts[0].coded()
    parts = [part if isinstance(part, RowBlock) else encode(part) for part in parts]
    total = sum(part.size for part in parts)
    codes = np.empty(total, dtype=np.int32)
    steps = np.empty(total, dtype=np.int64)
    values = np.empty(total, dtype=np.float64)
    timed = any((part.times if isinstance(part, RowBlock) else part.time_list) is not None for part in parts)
    times = np.empty(total, dtype=np.float64) if timed else None
    labels: dict[str, int] = {}
    at = 0
    for part in parts:
        end = at + part.size
        names = part.names if isinstance(part, RowBlock) else part.labels
        remap = np.array([labels.setdefault(name, len(labels)) for name in names], dtype=np.int32)
        if isinstance(part, RowBlock):
            part.fill(codes[at:end], steps[at:end], values[at:end], None if times is None else times[at:end], remap)
        else:
            codes[at:end] = remap[part.codes]
            steps[at:end] = part.step_array
            values[at:end] = part.value_array
            if times is not None:
                times[at:end] = np.nan if part.time_list is None else np.array(part.time_list, dtype=np.float64)
        at = end
    return CodedColumns(list(labels), codes, steps, values, times, ordered=all(part.ordered for part in parts))
