from __future__ import annotations

import dataclasses
import math

from stethoscope.importers.table import Layout, PointTable, make_points
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
