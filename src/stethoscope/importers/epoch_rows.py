"""JSON lines whose counters are kept per epoch, as OpenMMLab's two loggers write them.

* mmcv 1.x `.log.json`: `{"mode": "train", "epoch": 3, "iter": 200, ..}`: `iter` starts over every epoch while
  `epoch` moves, so it is a position within the epoch: the step is (epoch - first) x period + iter, the period
  being the epoch's length in iterations (the largest position a train row shows; an eval row's `iter` that lies
  within one logging interval above it is the train loop's own length, which mmcv's EvalHook logs). An eval row
  (`mode: val`) is the evaluation at the end of its epoch, never a step of its own.
* mmengine `vis_data/scalars.json`: train rows carry `epoch` and the global iteration as `step`; an epoch-based
  loop's eval rows (no `epoch`) carry the epoch as `step`: an eval row whose step is the epoch of the train row
  before it, and below that row's step, is the evaluation at the last train step of that epoch.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from stethoscope.logtext.table import to_float

EPOCH_KEYS = ("epoch", "epochs")


@dataclass(slots=True)
class Row:
    """One JSON line: its line number, step, fields (the step key taken out) and the eval split it records, if
    any (`eval`, `test`)."""

    line: int
    step: int
    flat: dict[str, Any]
    split: str | None = None


def epoch_steps(rows: list[Row]) -> str | None:
    """Rewrites `rows`' steps in place where their counters are kept per epoch; the note saying how, or None
    (rows left as they are)."""
    train = [r for r in rows if not r.split and r.flat.get(_epoch_key(r.flat)) is not None]
    epochs = [_whole(r.flat[_epoch_key(r.flat)]) for r in train]
    if len(train) < 2 or None in epochs:
        return None
    if _restarts_each_epoch(train, epochs):  # type: ignore[arg-type]
        return _globalise(rows, train, epochs)  # type: ignore[arg-type]
    return _evals_at_epoch_ends(rows, train, epochs)  # type: ignore[arg-type]


def _epoch_key(flat: dict[str, Any]) -> str:
    return next((k for k in flat if k.strip().lower() in EPOCH_KEYS), "")


def _whole(value: Any) -> int | None:
    number = to_float(value)
    return int(number) if number is not None and number.is_integer() else None


def _restarts_each_epoch(train: list[Row], epochs: list[int]) -> bool:
    """Does the step start over at every epoch change, and only there, over 2+ epochs?"""
    changes = 0
    for (a, ea), (b, eb) in zip(zip(train, epochs), zip(train[1:], epochs[1:])):
        if eb < ea or eb == ea and b.step <= a.step:
            return False  # epochs going back, or a position going back within one: no per-epoch counter
        if eb > ea:
            if b.step > a.step:
                return False  # a global counter
            changes += 1
    return changes >= 1


def _globalise(rows: list[Row], train: list[Row], epochs: list[int]) -> str:
    period = max(r.step for r in train)
    gaps = [b.step - a.step for (a, ea), (b, eb) in zip(zip(train, epochs), zip(train[1:], epochs[1:])) if ea == eb]
    interval = min(gaps) if gaps else 0
    ends = Counter(r.step for r in rows if r.split and period <= r.step < period + interval)
    if ends:
        period = ends.most_common(1)[0][0]
    first = 0 if min(epochs) == 0 else 1
    last_epoch = first
    for row in rows:
        epoch = _whole(row.flat.get(_epoch_key(row.flat)))
        epoch = last_epoch if epoch is None else epoch
        row.step = (epoch - first + 1) * period if row.split else (epoch - first) * period + row.step
        last_epoch = epoch
    return (f"the step counter starts over every epoch: the step is (epoch - {first}) x {period} + that "
            f"counter; an eval row is placed at the end of its epoch")


def _evals_at_epoch_ends(rows: list[Row], train: list[Row], epochs: list[int]) -> str | None:
    last_of: dict[int, int] = {}
    for row, epoch in zip(train, epochs):
        last_of[epoch] = max(last_of.get(epoch, row.step), row.step)
    moved: list[tuple[Row, int]] = []
    before: tuple[int, int] | None = None  # (epoch, step) of the last train row seen
    for row in rows:
        epoch = _whole(row.flat.get(_epoch_key(row.flat)))
        if epoch is not None and not row.split:
            before = (epoch, row.step)
        elif _epoch_key(row.flat) == "":
            if before is None or row.step != before[0] or row.step >= before[1]:
                return None  # an eval row stamped with an iteration: nothing to move
            moved.append((row, last_of[row.step]))
    if not moved:
        return None
    for row, step in moved:
        row.step, row.split = step, "eval"
    return "an eval row's step is its epoch: placed at the last train step of that epoch"


def rising(values: list[int | None]) -> list[int | None] | None:
    """The epochs of a table's rows (-1: a blank row) as its steps, or None when they are no counter of rows: a
    whole number on every row with values, rising from row to row (a table that logs several rows an epoch
    repeats them), save where a run appended to the same file starts over (a resume, as steps going back)."""
    seen = [v for v in values if v != -1]
    if len(seen) < 2 or None in seen or any(b == a for a, b in zip(seen, seen[1:])):
        return None
    restarts = sum(1 for a, b in zip(seen, seen[1:]) if b < a)  # a run appended to the same file, from its start
    if restarts > len(seen) // 4:
        return None
    return [None if v == -1 else v for v in values]


# Names of a counter a table without a step column may count its rows by (an RL loop's episodes, PPO's updates,
# a game's frames or rounds): the step when its whole numbers rise on every row.
_COUNTER_KEYS = ("episode", "episodes", "update", "updates", "frame", "frames", "round", "rounds", "generation")


def counter_key(header: list[str]) -> int | None:
    """The column named as a counter of rows (`_COUNTER_KEYS`), else None: the step when it rises (`rising`)."""
    return next((i for i, h in enumerate(header) if h.strip().lower() in _COUNTER_KEYS), None)
