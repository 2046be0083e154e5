"""Speed helpers of the console reader's walk (issue 28.4): choices that change how much work a log costs,
never what is read from it.

A window of interleaved shapes (`console_walk._segment`, `console_runs.window_at`) starts small and doubles
while no long run cuts it short, so that a log of long runs with a few lines between them never makes the
shapes of a big window it does not need. A window is also cut where the segment of shapes made so far ends
(its last run may go on past it): that cut says nothing about the log, and starting small again after
each one made Keras' log (a redrawn bar: windows all the way) read ~140 windows instead of ~40, paying each
window's fixed cost (its line kinds, a scanner call per shape, the merge) 3.5 times as often.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stethoscope.logtext.console_runs import repeats


def cut_by_run(shapes: bytes, at: int, long_run: int) -> bool:
    """Whether the window that ends at `shapes[at]` (where a line's shape starts) was cut by a long run:
    the run of the shape at `at` is at least `long_run` lines, or does not reach the end of `shapes` (it
    was cut by a run after it); False when it is shorter and reaches the end (the segment ended there)."""
    end = shapes.find(b"\n", at)
    if end < 0:
        return True
    unit = shapes[at: end + 1]
    count = repeats(shapes, at, unit)
    return count >= long_run or at + count * len(unit) != len(shapes)


def join(parts: Sequence[Any]) -> Any:
    """`coded.join(parts)`; where a part holds rows of one layout (a `RowBlock`: a long run read at once), the
    parts kept as they are until their points are first read (`coded_parts.PartsColumns`: the same points
    then), as the Megatron reader hands them over. A 1M-line log of 6 metrics a line no longer lays out 6M
    points (120 MB of fresh memory: ~0.1-0.25 s of a ~0.35 s read here, most of it the kernel's page faults)
    that the diagnosis' table would pivot back into rows (`diagnose.table.Table._stacked` takes the rows)."""
    from stethoscope.logtext.coded import RowBlock
    from stethoscope.logtext.coded import join as laid_out

    if any(isinstance(part, RowBlock) and part.size for part in parts):
        from stethoscope.logtext.coded_parts import PartsColumns

        return PartsColumns(parts)
    return laid_out(parts)


def descends(columns: Any) -> bool:
    """Whether `twice_logged.once` must look at the laid-out points of `columns`: whether a point has the step
    of the point before it and a name code not above it (where `once` looks for a twin), told from a
    `PartsColumns`' parts without laying them out; True for anything else. Codes as `join` numbers them (names
    in the order first met). A part of points (a window's: Keras' epoch-end line prints the step time before
    the loss) whose step runs all stay inside it is looked into alone: only a twin there needs the layout."""
    from stethoscope.logtext.coded import CodedColumns, RowBlock
    from stethoscope.logtext.coded_parts import PartsColumns
    from stethoscope.logtext.console_segment import TurnBlock

    if not isinstance(columns, PartsColumns) or not any(type(part) in (RowBlock, TurnBlock) for part in columns.parts):
        return True
    import numpy as np

    alone = len(columns.parts) == 1  # one block: `join` codes its names by their place (a name twice: two codes)
    labels: dict[str, int] = {}
    before: tuple[int, int] | None = None  # the last point's (step, code)
    edges: list[tuple[int, int]] = []  # each part's first and last step
    alone_parts: list[tuple[int, Any]] = []  # parts of points whose points descend: looked into alone
    for part in columns.parts:
        if type(part) is RowBlock:
            remap = np.arange(len(part.names)) if alone else \
                np.array([labels.setdefault(name, len(labels)) for name in part.names], dtype=np.int64)
            steps = part.steps
            if (remap[1:] <= remap[:-1]).any():  # a row's points: the same step
                return True
            if remap[0] <= remap[-1] and bool((steps[1:] == steps[:-1]).any()):  # a row and the next
                return True
            first, last = (int(steps[0]), int(remap[0])), (int(steps[-1]), int(remap[-1]))
        elif isinstance(part, CodedColumns) and not isinstance(part, PartsColumns):
            remap = np.array([labels.setdefault(name, len(labels)) for name in part.labels], dtype=np.int64)
            codes, steps = remap[part.codes], part.step_array
            if bool(((steps[1:] == steps[:-1]) & (codes[1:] <= codes[:-1])).any()):
                alone_parts.append((len(edges), part))
            first, last = (int(steps[0]), int(codes[0])), (int(steps[-1]), int(codes[-1]))
        elif type(part) is TurnBlock:  # turns of a cycle's lines (Composer's), each turn's points in line order
            remap = np.arange(len(part.names)) if alone else \
                np.array([labels.setdefault(name, len(labels)) for name in part.names], dtype=np.int64)
            codes = remap[part.codes].tolist()
            steps = [np.asarray(column, dtype=np.int64) for column in part.steps]  # a turn's point: its column
            for j in range(len(codes) - 1):  # a point and the next in a turn
                if codes[j + 1] <= codes[j] and bool((steps[j + 1] == steps[j]).any()):
                    return True
            if codes[0] <= codes[-1] and bool((steps[0][1:] == steps[-1][:-1]).any()):  # a turn and the next
                return True
            first, last = (int(steps[0][0]), codes[0]), (int(steps[-1][-1]), codes[-1])
        else:  # anything else: the points decide
            return True
        if before is not None and first[0] == before[0] and first[1] <= before[1]:
            return True
        before = last
        edges.append((first[0], last[0]))
    from stethoscope.logtext.twice_logged import once

    for i, part in alone_parts:  # its step runs stay inside it (no neighbour's edge has its edge's step): its twins
        if (i and edges[i - 1][1] == edges[i][0]) or (i + 1 < len(edges) and edges[i][1] == edges[i + 1][0]):
            return True
        if once(part) is not part:  # a twin: the laid-out points decide (the same twin)
            return True
    return False
