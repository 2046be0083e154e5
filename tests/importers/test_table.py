from __future__ import annotations

import dataclasses
import math

from stethoscope.logtext.table import Layout, PointTable, Rejected, make_points
from stethoscope.records import Point


def test_bulk_built_points_equal_constructed_ones() -> None:
    # make_points sets Point's slots directly; this holds only while Point keeps exactly these fields
    # and has no __post_init__ to run.
    assert [f.name for f in dataclasses.fields(Point)] == ["name", "step", "value", "time"]
    assert not hasattr(Point, "__post_init__")
    built = make_points(["a", "b"], [1, 2], [0.5, 1.5], [None, 3.0])
    assert built == [Point("a", 1, 0.5), Point("b", 2, 1.5, 3.0)]
    assert hash(built[0]) == hash(Point("a", 1, 0.5))


def test_rows_come_back_in_order_with_scales_and_conversions() -> None:
    table = PointTable()
    table.add_row(1, b"10", None, Layout(("t", "x"), (0.001, 1.0)), (b"250", "2.5"))
    table.add(2, 9, 7.0, "x", 1)  # a repeated/lower step stays where it was logged
    table.add_values(3, "10", None, {"y": "nan"})
    points, rejected = table.build()
    assert [(p.name, p.step, p.value, p.time) for p in points[:3]] == [
        ("t", 10, 0.25, None), ("x", 10, 2.5, None), ("x", 9, 1.0, 7.0)]
    assert math.isnan(points[3].value)
    assert rejected == []


def test_values_that_are_not_numbers_are_left_out_and_reported() -> None:
    table = PointTable()
    table.add_values(4, 1, None, {"a": 1.0, "b": "n/a", "c": None, "d": True})
    table.add_values(5, 2, None, {"a": 2.0})
    points, rejected = table.build()
    assert [(p.name, p.step) for p in points] == [("a", 1), ("a", 2)]
    assert [(r.origin, r.name) for r in rejected] == [(4, "b"), (4, "c"), (4, "d")]


def test_rename_and_drop() -> None:
    table = PointTable()
    table.add_values(1, 1, None, {"old": 1.0, "gone": 2.0, "kept": 3.0})
    points, _ = table.build({"old": "new", "gone": None})
    assert [(p.name, p.value) for p in points] == [("new", 1.0), ("kept", 3.0)]


def test_many_rows_cross_chunks() -> None:
    table = PointTable()
    layout = Layout(("a", "b"))
    for i in range(5000):
        table.add_row(i, i, None, layout, (i, -i))
    points, _ = table.build()
    assert len(points) == 10000
    assert points[-1] == Point("b", 4999, -4999.0)


def test_blocks_of_regex_rows_keep_their_order_and_lines() -> None:
    table = PointTable()
    table.add(1, 0, None, "x", 1.0)
    rows = [(b"10", b"1.5", b"250"), (b"", b"", b""), (b"11", b"2.5", b"500")]  # the middle line: skipped
    table.add_block(2, Layout(("a", "t"), (1.0, 0.001)), rows, 0, (1, 2))
    table.add(5, 12, None, "x", 2.0)
    table.add_block(6, Layout(("a", "t")), [(b"13", b"oops", b"1"), (b"14", b"3.5", b"2")], 0, (1, 2))
    points, rejected = table.build({"t": "time_s"})
    assert [(p.name, p.step, p.value) for p in points] == [
        ("x", 0, 1.0), ("a", 10, 1.5), ("time_s", 10, 0.25), ("a", 11, 2.5), ("time_s", 11, 0.5), ("x", 12, 2.0),
        ("time_s", 13, 1.0), ("a", 14, 3.5), ("time_s", 14, 2.0)]
    assert rejected == [Rejected(6, "a", b"oops")]  # the exact line of the bad value
