"""Stretches of a console log where lines of several known shapes interleave, read a shape at a time.

Composer prints a `[batch=N/T]:` header and then one metric per line; Keras ends each epoch with a line
of another shape, and pads its counter (`  9/1000`, ` 10/1000`: another shape); a trainer may print an
eval line every 50 steps among its step lines. Read a run at a time, such a stretch is thousands of runs
of a few lines each. Here every line of one shape in the stretch is read at once (the native scanner's
columns at the lines' starts, or its token plan over the lines gathered into one buffer); a cycle of
shapes (Composer) is read as rows of its lines in one pass (`_turns`). The shapes' reads are merged back
into line order with numpy (lines that take turns side by side, without a sort, laid out once by `join`:
`_periodic`):

- lines that carry their step (a header, a step line) give it; a progress bar's counter restarts each
  epoch (`bar_steps`);
- record lines (one metric, no step) take the step of the last step line before them, or the reader's
  last step when none came before in the stretch; a dict record with no step anywhere before it is
  numbered in file order, as the line-by-line reader numbers it;
- the points of a line follow its layout's order, lines follow the log's order, as line-by-line
  reading gives them.

`combine` returns None when a record line has no step to take (the caller reads the stretch run by
run, where such a line is reported as line-by-line reading reports it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from stethoscope.logtext.coded import CodedColumns, RowBlock
from stethoscope.logtext.console_names import eval_record

if TYPE_CHECKING:
    from collections.abc import Callable

    from stethoscope.logtext.console_tokens import Read


class Group(NamedTuple):
    """The lines of one shape in a stretch: their line indices (0-based, ascending) and what was read."""

    lines: np.ndarray
    read: Read
    names: tuple[str, ...]
    own_step: bool
    bar: bool
    is_dict: bool
    period: int = 0  # k: `lines` are every k-th line of a cycle of k shapes in whole turns (`_parts`)


class Combined(NamedTuple):
    points: CodedColumns | RowBlock | None  # None: no line was kept (every line of another rank)
    steps: np.ndarray  # the steps of the step lines (kept), in line order
    per_layout: list[tuple[tuple[str, ...], int]]  # step lines per layout
    bar: tuple[int, int, int] | None
    ordinal: int


def read_groups(templates: dict[bytes, Any], lines: Any, start: int, ids: np.ndarray, kinds: list[bytes],
                keep_rank: bytes | None, arrow: Callable[[], bool]) -> list[Group] | None:
    """Lines start.. of `lines` (`console_runs.Lines`), whose shapes are `kinds[ids]`, each shape's lines
    gathered and read at once by its token plan (by the native scanner where they lie, two shapes at a
    time; else pyarrow for many lines of one shape); None when one does not read."""
    from stethoscope.logtext import console_arrow, console_tokens, linescan

    period = _period(ids)
    parts = [(templates[kinds[int(ids[part[0] - start])]], part) for part in _parts(ids, period, start)]
    if linescan.available() and period > 1:  # a cycle of shapes: its turns read as rows
        reads = _turns(lines, start, ids.size, [known.plan for known, _ in parts], keep_rank)
        if reads is not None:
            return [Group(at, read, known.layout.names, known.own_step, known.bar, known.is_dict, period)
                    for (known, at), read in zip(parts, reads)]

    def native(part: tuple[Any, np.ndarray]) -> Read | None:
        return console_tokens.read_raw(part[0].plan, lines.data, part[1].size, keep_rank, lines.starts(part[1]))

    if linescan.available():  # the lines read where they are in the data, not gathered first
        sizes = sorted(at.size for _, at in parts)
        if len(sizes) > 1 and sizes[-2] >= console_arrow.MIN_LINES:  # two shapes at a time
            reads = [read for _, read in linescan.ahead(native, parts)]
        else:  # one shape holds the lines: no thread would share the work
            reads = list(map(native, parts))
    else:
        reads = [None] * len(parts)
    groups = []
    for (known, at), read in zip(parts, reads):
        if read is None:
            raw = b"\n".join(lines.pick(at)) + b"\n"
            if at.size >= console_arrow.MIN_LINES and arrow():  # pyarrow imported only when it reads
                read = console_arrow.read(known.plan, raw, at.size, keep_rank)
            if read is None:
                read = console_tokens.read_raw(known.plan, raw, at.size, keep_rank)
        if read is None:
            return None
        groups.append(Group(at, read, known.layout.names, known.own_step, known.bar, known.is_dict, period))
    return groups


def _turns(lines: Any, start: int, count: int, plans: list[Any], keep_rank: bytes | None) -> list[Read] | None:
    """The lines start..start + count, a cycle of the k shapes of `plans`, read as rows of k lines (one
    pass of the scanner over their bytes, in pieces two at a time; `_linescan.columns`' per_row), each
    shape's columns then made a Read as its own lines would give; None when a row does not read so."""
    from stethoscope.logtext import console_tokens, linescan
    from stethoscope.logtext.console_reader import NATIVE_PIECE_BYTES

    picks = [console_tokens.native_picks(p, keep_rank) for p in plans]
    if None in picks:
        return None
    offsets = np.cumsum([0, *(p.width for p in plans)]).tolist()
    tokens = [t + offsets[j] for j, pick in enumerate(picks) for t in pick[0]]  # type: ignore[index]
    kinds = "".join(pick[1] for pick in picks)  # type: ignore[index]
    commas = [c for pick in picks for c in pick[2]]  # type: ignore[union-attr]
    k, data = len(plans), lines.data
    q, q_end = lines.span(start, start + count)
    rows = max(1, count // k * NATIVE_PIECE_BYTES // max(1, q_end - q))  # rows of a piece of about that size

    def cuts() -> Any:
        a = q
        while a < min(q_end, len(data)):
            found, b = linescan.skip_lines(data, a, rows * k)
            b = b if found == rows * k and b < q_end else q_end
            yield a, b
            a = b

    view = memoryview(data)
    got = [read for _, read in linescan.ahead(
        lambda cut: linescan.columns(view[cut[0]: min(cut[1], len(data))], offsets[-1], tokens, kinds, commas, None, k),
        cuts())]
    if not got or any(g is None for g in got):
        return None
    table = np.concatenate(got) if len(got) > 1 else got[0]
    if table.shape[0] * k != count:
        return None
    reads, column = [], 0
    for plan, pick in zip(plans, picks):
        width = len(pick[0])  # type: ignore[index]
        reads.append(console_tokens.from_columns(plan, table[:, column: column + width], pick[0], keep_rank))  # type: ignore[index]
        column += width
    return reads


def _period(ids: np.ndarray) -> int:
    """k when `ids` is 0..k-1 repeated (a cycle of k shapes, whole turns), else 0."""
    k = int(ids.max()) + 1
    if ids.size % k or (k > 1 and ids[1] != 1) or ids[0] != 0:
        return 0
    turn, step = np.arange(k, dtype=ids.dtype), k << 14  # compared a piece at a time: no fresh memory as big as `ids`
    return k if all((ids[at: at + step].reshape(-1, k) == turn).all() for at in range(0, ids.size, step)) else 0


def _parts(ids: np.ndarray, k: int, start: int) -> list[np.ndarray]:
    """`start` + the indices of each shape's lines, ascending, the shapes in the order of their first lines
    (a cycle of `k` shapes, `ids` = 0..k-1 repeated, `_period`: without sorting)."""
    if k:
        return [np.arange(start + i, start + ids.size, k) for i in range(k)]
    order = np.argsort(ids, kind="stable")
    return np.split(order + start, np.flatnonzero(ids[order][1:] != ids[order][:-1]) + 1)


def bar_steps(raw: np.ndarray, state: tuple[int, int, int] | None) -> tuple[np.ndarray, tuple[int, int, int]]:
    """Global steps of a progress bar's counters (in line order) and the bar state after them: a bar that
    goes back after reaching its largest counter so far starts a new epoch, offset by that counter, unless
    it falls into the second half: a late redraw (`console_epochs.bar_step`, one line at a time, the same)."""
    offset, last, total = state or (0, 0, 0)
    raw = np.asarray(raw, dtype=np.int64)
    if not raw.size:
        return raw, (offset, last, total)
    totals = np.maximum.accumulate(np.concatenate(([total], raw)))  # totals[j]: the total before line j
    top = totals[:-1]
    back = np.flatnonzero(raw[1:] < raw[:-1]) + 1  # where the counter goes back: an epoch or a late redraw
    if raw[0] < last:
        back = np.concatenate(([0], back))
    before, at = np.where(back > 0, raw[back - 1], last), top[back]
    new = (before >= at) & (at > 0)
    if not (new & (2 * raw[back] > at)).any():  # no late redraw (else as below): only those lines looked at
        starts = np.concatenate(([0], back[new], [raw.size]))  # the epochs' first lines (the offset is constant)
        offsets = np.repeat(offset + np.cumsum(np.concatenate(([0], at[new]))), np.diff(starts))
        return offsets + raw, (int(offsets[-1]), int(raw[-1]), int(totals[-1]))
    before = np.concatenate(([last], raw[:-1]))
    late = (raw < before) & (before >= top) & (top > 0) & (2 * raw > top)  # a late redraw (`bar_step`)
    raw = np.where(late, top, raw)
    before = np.concatenate(([last], raw[:-1]))
    grow = np.where((raw < before) & (before >= top) & (top > 0), top, 0)
    offsets = offset + np.cumsum(grow)
    return offsets + raw, (int(offsets[-1]), int(raw[-1]), int(totals[-1]))


def combine(groups: list[Group], last_step: int | None, bar: tuple[int, int, int] | None,
            ordinal: int) -> Combined | None:
    kept = [g.lines if _keep(g.read) is None else g.lines[_keep(g.read)] for g in groups]
    steps: list[np.ndarray | None] = [None] * len(groups)
    own = [i for i, g in enumerate(groups) if g.own_step]
    bars = [i for i in own if groups[i].bar]
    in_order = None  # (the bars' lines, their order, their steps in that order): the same sort as own's below
    for indices, is_bar in ((bars, True), ([i for i in own if not groups[i].bar], False)):
        if not indices:
            continue
        raw = _joined([np.asarray(groups[i].read.steps, dtype=np.int64) for i in indices])
        if is_bar:
            at = _joined([kept[i] for i in indices]) if len(indices) > 1 else None
            order = np.argsort(at, kind="stable") if at is not None else np.arange(raw.size)  # one group: in order
            ordered, bar = bar_steps(raw[order], bar)
            in_order = (at, order, ordered) if at is not None else None
            raw = np.empty_like(ordered)
            raw[order] = ordered
        start = 0
        for i in indices:
            steps[i] = raw[start: start + kept[i].size]
            start += kept[i].size
    if own and in_order is not None and own == bars:  # every step line a bar's (Keras'): sorted above already
        step_at, step_of = in_order[0][in_order[1]], in_order[2]
    elif own:
        step_at = _joined([kept[i] for i in own])
        step_of = _joined([steps[i] for i in own])  # type: ignore[misc]
        if len(own) > 1:
            order = np.argsort(step_at, kind="stable")
            step_at, step_of = step_at[order], step_of[order]
    else:
        step_at = step_of = np.zeros(0, dtype=np.int64)
    turns = _turns_taken(kept, all(g.period == len(groups) and kept[i] is g.lines for i, g in enumerate(groups)))
    unnumbered = []  # dict records before any step: numbered in file order
    for i, g in enumerate(groups):
        if g.own_step:
            continue
        if turns is not None and own:  # lines that take turns: the step line earlier in the same turn, else
            earlier = [j for j in own if turns.index(j) < turns.index(i)]  # the last one of the turn before
            if earlier:
                steps[i] = steps[max(earlier, key=turns.index)]
                continue
            if last_step is not None:
                steps[i] = np.concatenate(([last_step], steps[max(own, key=turns.index)][:-1]))  # type: ignore[index]
                continue
        before = np.searchsorted(step_at, kept[i]) - 1
        took = step_of[np.maximum(before, 0)] if step_of.size else np.zeros(kept[i].size, dtype=np.int64)
        if last_step is not None:
            steps[i] = np.where(before >= 0, took, last_step)
        elif (before < 0).any():
            if not g.is_dict:
                return None
            unnumbered.append(i)
            steps[i] = took
        else:
            steps[i] = took
    if unnumbered:  # an eval's dict takes the number of the record before it (`console_names.ordinal_steps`)
        at = np.concatenate([kept[i][np.searchsorted(step_at, kept[i]) == 0] for i in unnumbered])
        held = np.concatenate([np.full(int((np.searchsorted(step_at, kept[i]) == 0).sum()),
                                       eval_record(groups[i].names)) for i in unnumbered])
        order = np.argsort(at, kind="stable")
        rise = ~held[order]
        rise[0] |= ordinal == 0
        numbers = np.empty(at.size, dtype=np.int64)
        numbers[order] = ordinal + np.cumsum(rise)
        start = 0
        for i in unnumbered:
            first = np.searchsorted(step_at, kept[i]) == 0
            steps[i][first] = numbers[start: start + int(first.sum())]  # type: ignore[index]
            start += int(first.sum())
        ordinal += int(rise.sum())
    per_layout = [(g.names, int(kept[i].size)) for i, g in enumerate(groups) if g.own_step]
    return Combined(_points(groups, kept, steps, turns), step_of, per_layout, bar, ordinal)  # type: ignore[arg-type]


def _joined(arrays: list[np.ndarray]) -> np.ndarray:
    """The arrays one after the other: the one array itself when there is one (not copied; not written to)."""
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)


def _keep(read: Read) -> Any:
    return None if read.keep is None else np.asarray(read.keep, dtype=bool)


def _points(groups: list[Group], kept: list[np.ndarray], steps: list[np.ndarray],
            turns: list[int] | None) -> CodedColumns | RowBlock | None:
    """Every kept line's points, in line order and each line's in its layout's order: side by side where the
    groups take `turns` (`_turns_taken`), else each group's points written where they go (a line's first
    point after the points of the lines before it), no sort."""
    if turns is not None:
        return _periodic(groups, kept, steps, turns)
    present = [i for i, at in enumerate(kept) if at.size]
    if not present:
        return None
    low = min(int(kept[i][0]) for i in present)
    width = np.zeros(max(int(kept[i][-1]) for i in present) + 1 - low, np.int64)
    for i in present:
        width[kept[i] - low] = len(groups[i].names)
    first = np.cumsum(width) - width  # where each line's points start
    size = int(first[-1] + width[-1])
    codes, step_of, values = np.empty(size, np.int32), np.empty(size, np.int64), np.empty(size, np.float64)
    timed = any(g.read.times is not None for g in groups)
    times = np.full(size, np.nan) if timed else None
    labels: dict[str, int] = {}
    for i in present:
        g, at = groups[i], first[kept[i] - low]  # where the group's lines' first points go
        for name, column in zip(g.names, g.read.values):
            codes[at] = labels.setdefault(name, len(labels))
            step_of[at] = steps[i]
            values[at] = column
            if times is not None and g.read.times is not None:
                times[at] = g.read.times
            at += 1  # (`at` is the group's own: fancy-indexed)
    return CodedColumns(list(labels), codes, step_of, values, times)


def _turns_taken(kept: list[np.ndarray], periodic: bool = False) -> list[int] | None:
    """The groups in the order they take turns when their lines do (k groups, each holding every k-th line
    from k consecutive first lines: Composer's header and record lines); None when they do not. `periodic`:
    each holds every k-th line already (`_parts` of a cycle, whole turns): its spacing is not checked again."""
    n, k = kept[0].size, len(kept)
    if not n or any(at.size != n for at in kept):
        return None
    order = sorted(range(k), key=lambda i: int(kept[i][0]))
    first = int(kept[order[0]][0])
    if any(int(kept[i][0]) != first + turn for turn, i in enumerate(order)) or \
            not periodic and any(n > 1 and not (np.diff(at) == k).all() for at in kept):
        return None
    return order


def _periodic(groups: list[Group], kept: list[np.ndarray], steps: list[np.ndarray],
              order: list[int]) -> TurnBlock:
    """`_points` of groups whose lines take turns in `order` (Composer's header and record lines: the k
    groups each hold every k-th line, from k consecutive first lines; `_turns_taken`): the lines' points
    side by side, a row per turn, no sort; laid out by `join` (`TurnBlock`)."""
    labels: dict[str, int] = {}
    codes = [labels.setdefault(name, len(labels)) for i in order for name in groups[i].names]
    columns = [(i, j) for i in order for j in range(len(groups[i].names))]  # a turn's points, in line order
    timed = any(g.read.times is not None for g in groups)  # (a timed line without values too: NaN times)
    return TurnBlock(list(labels), np.array(codes, np.int32), [steps[i] for i, _ in columns],
                     [groups[i].read.values[j] for i, j in columns],
                     [groups[i].read.times for i, _ in columns] if timed else None, int(kept[0].size))


class TurnBlock(RowBlock):
    """Points of lines that take turns, not laid out yet: `n` turns of a turn's points in line order, each
    its code into `names` (`codes`), its steps (`steps`, one array a point of the turn), values (`columns`)
    and times (`times`: arrays or None, NaN; None when no point has one). `join` writes them straight into
    its output (`fill`: no points-sized temporaries, no second copy); anything else takes `coded()`."""

    __slots__ = ("codes", "n")

    def __init__(self, names: list[str], codes: np.ndarray, steps: list[np.ndarray], columns: list[np.ndarray],
                 times: list[np.ndarray | None] | None, n: int) -> None:
        super().__init__(names, steps, columns, times)  # type: ignore[arg-type]
        self.codes, self.n = codes, n

    @property
    def size(self) -> int:
        return self.n * int(self.codes.size)

    @property
    def ordered(self) -> bool:
        return False  # a name may be printed by two of the shapes (what `CodedColumns` said, `first_seen`)

    def coded(self) -> CodedColumns:
        size = self.size
        codes, steps, values = np.empty(size, np.int32), np.empty(size, np.int64), np.empty(size, np.float64)
        times = None if self.times is None else np.empty(size, np.float64)
        self.fill(codes, steps, values, times, np.arange(len(self.names), dtype=np.int32))
        return CodedColumns(self.names, codes, steps, values, times)

    def fill(self, codes: np.ndarray, steps: np.ndarray, values: np.ndarray, times: np.ndarray | None,
             remap: np.ndarray) -> None:
        """Lay the points out into slices of `join`'s output (turns x points views)."""
        shape = (self.n, int(self.codes.size))
        codes.reshape(shape)[:] = remap[self.codes]
        grid = steps.reshape(shape)
        if self.steps and all(column is self.steps[0] for column in self.steps):  # records take their header's step
            grid[:] = np.asarray(self.steps[0], dtype=np.int64)[:, None]
        else:
            for at, column in enumerate(self.steps):
                grid[:, at] = column
        grid = values.reshape(shape)
        for at, column in enumerate(self.columns):
            grid[:, at] = column
        if times is not None:
            grid = times.reshape(shape)
            for at, column in enumerate(self.times or [None] * shape[1]):
                grid[:, at] = np.nan if column is None else column
