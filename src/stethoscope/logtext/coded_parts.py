"""Columns of a big log kept as its reader's parts until a reader asks for points (`PartsColumns`).

A big log's reader ends with parts in log order: rows of one layout (`RowBlock`s: a 1M-step Megatron log
is ~280 of them) and the few points read line by line. `join` lays them out as points (a name code, a
step and a value each: ~100 MB of fresh memory for 5M points), which the step x series table
(`diagnose.table`) then pivots back into rows, ~0.25 s of a diagnosis that reads the log in ~0.5 s.
`PartsColumns` keeps the parts: the table takes their rows as they are (`Table.from_columns`), and the
points are laid out, equal to `join`'s, the first time anything else reads them
(tests/importers/test_megatron_speed_parts.py compares both).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stethoscope.logtext.coded import CodedColumns, RowBlock, encode, join

# What `join`'s CodedColumns holds per point: laid out on first use. `labels` is not among them: it is
# known from the parts (and may be renamed before the points are laid out: importers.held_out does).
_POINT_SLOTS = frozenset(("codes", "step_array", "value_array", "time_list", "ordered", "_lists", "_last_time"))


class PartsColumns(CodedColumns):
    """`join(parts)` (parts among which at least one RowBlock), laid out when its points are first read;
    `parts` (the non-empty ones, in log order) stay readable as they are."""

    __slots__ = ("parts", "_size")

    def __init__(self, parts: Sequence[Any]) -> None:  # the point slots stay unset: `__getattr__` fills them
        # The few points read line by line are encoded now, as `join` encodes them (a step beyond 64 bits
        # fails here, while the log is read, not when the points are first read).
        self.parts = [part if isinstance(part, (RowBlock, CodedColumns)) else encode(part) for part in parts if part.size]
        self._size = sum(part.size for part in self.parts)
        labels: dict[str, None] = {}
        for part in self.parts:
            labels.update(dict.fromkeys(part.names if isinstance(part, RowBlock) else part.labels))
        self.labels = list(labels)

    def __getattr__(self, name: str) -> Any:
        """Only for the point slots not laid out yet (an unset slot lands here); anything else is an error."""
        if name not in _POINT_SLOTS:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        built = join(self.parts)
        for slot in _POINT_SLOTS:
            setattr(self, slot, getattr(built, slot))
        self._lists = None  # built from self.labels when asked for: they may have been renamed
        return getattr(self, name)

    @property
    def size(self) -> int:
        return self._size

    @property
    def last_time(self) -> float | None:
        """The last point's time, as `join`'s output gives it (None where it has none)."""
        if not self.parts:
            return None
        last = self.parts[-1]
        if isinstance(last, RowBlock):
            if last.times is None:
                return None
            t = float(last.times[-1])
            return None if t != t else t
        t = None if last.time_list is None else last.time_list[-1]  # after a RowBlock `join` makes them an array
        return None if t is None or t != t else float(t)

