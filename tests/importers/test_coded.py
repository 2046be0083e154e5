from __future__ import annotations

import math

import numpy as np

from stethoscope.diagnose.table import Table
from stethoscope.importers.base import Columns
from stethoscope.logtext.coded import CodedColumns, encode, join


def _columns() -> Columns:
    # names first seen late, a repeated step, a resume (steps going back), NaN and -0.0, one time
    names = ["b", "a", "b", "a", "c", "b", "a", "b"]
    steps = [5, 5, 6, 6, 6, 3, 3, 4]
    values = [1.0, -0.0, math.nan, 2.5, 7.0, 1e300, 3.0, math.inf]
    times = [None, None, None, None, None, None, None, 12.5]
    return Columns(names, steps, values, times)


def _points(columns: Columns | CodedColumns) -> list[tuple[object, ...]]:
    """The points as comparable tuples (NaN == NaN here)."""
    return [(n, s, "nan" if math.isnan(v) else v, t) for n, s, v, t in zip(*columns)]


def _same_table(a: Table, b: Table) -> None:
    assert a.names == b.names and a.last_time == b.last_time and a.n_steps == b.n_steps
    assert a.steps.tolist() == b.steps.tolist() and (a.present == b.present).all()
    assert a.values.tobytes() == b.values.tobytes()


def test_the_list_form_equals_the_columns_it_came_from() -> None:
    cols = _columns()
    coded = encode(cols)
    assert coded.size == len(cols.names) and coded.last_time == 12.5 and coded.distinct_steps() == 4
    assert _points(coded) == _points(cols)
    assert math.copysign(1, coded.values[1]) == -1.0
    assert [list(map(type, c)) for c in coded] == [list(map(type, c)) for c in cols]


def test_the_table_of_coded_columns_equals_the_table_of_lists() -> None:
    cols = _columns()
    _same_table(Table.from_columns(encode(cols)), Table.from_columns(cols))


def test_duplicate_and_unused_labels_are_merged_and_dropped() -> None:
    coded = CodedColumns(["x", "unused", "y", "x"], np.array([3, 2, 0, 2], dtype=np.int32),
                         np.array([1, 1, 2, 2]), np.array([1.0, 2.0, 3.0, 4.0]))
    names, codes = coded.first_seen()
    assert names == ["x", "y"] and codes.tolist() == [0, 1, 0, 1]
    _same_table(Table.from_columns(coded), Table.from_columns(coded.lists()))


def test_join_keeps_log_order_across_list_and_coded_parts() -> None:
    cols = _columns()
    head = Columns(cols.names[:3], cols.steps[:3], cols.values[:3], cols.times[:3])
    tail = encode(Columns(cols.names[3:], cols.steps[3:], cols.values[3:], cols.times[3:]))
    joined = join([head, tail])
    assert isinstance(joined, CodedColumns) and _points(joined) == _points(cols)
    _same_table(Table.from_columns(joined), Table.from_columns(cols))


def test_join_of_list_parts_stays_a_list() -> None:
    a, b = Columns(["x"], [1], [1.0], [None]), Columns(["y"], [2], [2.0], [3.0])
    joined = join([a, b])
    assert isinstance(joined, Columns) and joined == Columns(["x", "y"], [1, 2], [1.0, 2.0], [None, 3.0])


def test_row_blocks_join_like_the_points_they_hold() -> None:
    """A RowBlock is written straight into `join`'s output: the same points (names, steps, values, NaN,
    -0.0, times and their absence) as the block laid out first, between parts of the other kinds."""
    from stethoscope.logtext.coded import RowBlock, rows_of

    timed = rows_of(["x", "b"], [7, 8, 9], [[1.0, -0.0, math.nan], [2.0, 3.0, math.inf]], [1.5, 2.5, 3.5])
    plain = rows_of(["a"], [10, 11], [[4.0, 5.0]], None)
    assert isinstance(timed, RowBlock) and isinstance(plain, RowBlock)
    parts = [_columns(), timed, encode(_columns()), plain]
    laid_out = [part.coded() if isinstance(part, RowBlock) else part for part in parts]
    got, want = join(parts), join([encode(p) if isinstance(p, Columns) else p for p in laid_out])
    assert _points(got) == _points(want) and got.size == 8 + 6 + 8 + 2
    assert got.labels[:3] == ["b", "a", "c"] and got.last_time is None  # the last block has no time
    assert [t for t in got.times[8:14]] == [1.5, 1.5, 2.5, 2.5, 3.5, 3.5]
    assert _points(join([timed])) == _points(timed.coded())


def test_distinct_steps_in_order_and_out_of_order() -> None:
    """Steps in log order are counted without a sort; a resume (steps going back) still counts each once."""
    for steps in ([], [7], [1, 2, 2, 3, 3, 3], [3, 1, 2, 1, 3], [5, 5, 6, 6, 6, 3, 3, 4], list(range(1000)) * 2):
        cols = Columns(["x"] * len(steps), steps, [1.0] * len(steps), [None] * len(steps))
        assert encode(cols).distinct_steps() == len(set(steps)) == cols.distinct_steps()
