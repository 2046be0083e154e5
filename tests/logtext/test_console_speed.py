"""What keeps the console reader's interleaved shapes cheap (issue 28.4): a run's lines are not split into
a list when their span is known, and the points of interleaved shapes are laid out in line order without a
sort (`console_segment._points`), giving what the line-by-line reader gives."""

from __future__ import annotations

import io
import random
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from stethoscope.logtext import console_segment, console_walk, linescan
from stethoscope.logtext.console_reader import ConsoleReader
from stethoscope.logtext.console_runs import Lines, shape_of
from stethoscope.logtext.console_tokens import Read

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import import_speed  # noqa: E402


built = pytest.mark.skipif(not linescan.available(), reason="the line scanner was not built (no C compiler)")


def _keras(lines: int) -> bytes:
    rng, out = random.Random(3), io.StringIO()
    for s in range(1, lines + 1):
        import_speed.CONSOLE_SHAPES["Keras progress"](out, s, rng)
    return out.getvalue().encode()


@built
def test_runs_of_a_keras_log_are_read_without_splitting_their_lines(monkeypatch) -> None:
    """Keras' epochs: runs of 90 and 900 lines of one shape between short ones, read as runs by the scanner's
    columns. A run's byte span is known, so its lines are never split into a list (splitting 1M lines cost
    the Keras bench ~5% of its read); the points are the line-by-line reader's."""
    data = _keras(3000)
    split: list[int] = []
    items = Lines.items
    monkeypatch.setattr(Lines, "items", lambda self: split.append(self.first) or items(self))
    runs: list[int] = []
    run = ConsoleReader._run
    monkeypatch.setattr(ConsoleReader, "_run", lambda self, start, end, *a: runs.append(end - start) or
                        run(self, start, end, *a))
    fast = ConsoleReader("log")
    fast.feed(data)
    assert max(runs) >= 64 and split == []
    monkeypatch.undo()
    slow = ConsoleReader("log")
    for number, line in enumerate(data.split(b"\n"), 1):
        slow.line(number, line)
    got, want = fast.result().columns, slow.result().columns
    assert (list(got.names), list(got.steps), list(got.values)) == (list(want.names), list(want.steps),
                                                                     list(want.values))
    assert len(set(got.steps)) == 3000


def _group(lines: list[int], names: tuple[str, ...], times: bool) -> console_segment.Group:
    values = [[10.0 * line + j for line in lines] for j in range(len(names))]
    read = Read(lines, values, [1e9 + line for line in lines] if times else None, len(lines))
    return console_segment.Group(np.array(lines), read, names, True, False, False)


def test_points_of_interleaved_shapes_of_several_widths_are_in_line_order() -> None:
    """Three shapes of 2, 1 and 3 metrics, their lines interleaved without a period, one with times: each
    line's points in its layout's order, lines in log order, a line without times NaN; names coded in the
    order they are first met shape by shape (what the sorting merge gave)."""
    groups = [_group([0, 3, 4, 9], ("train/loss", "lr"), False), _group([1, 5], ("eval/loss",), True),
              _group([2, 6, 7, 8], ("grad/norm", "train/loss", "perf/step_time"), False)]
    kept = [g.lines for g in groups]
    steps = [np.array(g.read.steps, dtype=np.int64) for g in groups]
    points = console_segment._points(groups, kept, steps, console_segment._turns_taken(kept))
    want = sorted((line, j, name, 10.0 * line + j, 1e9 + line if g.read.times else None)
                  for g in groups for line in g.lines.tolist() for j, name in enumerate(g.names))
    assert points is not None and points.labels == ["train/loss", "lr", "eval/loss", "grad/norm", "perf/step_time"]
    assert [points.labels[c] for c in points.codes.tolist()] == [w[2] for w in want]
    assert points.step_array.tolist() == [w[0] for w in want]
    assert points.value_array.tolist() == [w[3] for w in want]
    assert [None if t != t else t for t in points.time_list.tolist()] == [w[4] for w in want]


@pytest.mark.parametrize("timed", [False, True], ids=["untimed", "timed"])
@pytest.mark.parametrize("header", [0, 1, 2], ids=["header-first", "header-second", "header-last"])
def test_lines_that_take_turns_are_laid_out_once_by_join(header: int, timed: bool) -> None:
    """Composer's header and record lines taking turns: their points are not laid out side by side and then
    copied again by `join` (two points-sized copies of every column, ~10% of a Composer read); they come as
    a block (`TurnBlock`) that `join` writes straight into its output. The points are the line order's:
    a record before the header in its turn takes the last turn's step (the reader's last step in the first
    turn), a name printed by two shapes keeps one label, a shape without times gives NaN; the same alone
    (`coded()`) and after other parts."""
    from stethoscope.logtext.coded import CodedColumns, RowBlock, join

    n, first, last_step = 5, 10, 7
    shapes = [(("train/loss", "lr"), False), (("time/batch",), False), (("train/loss",), False)]
    shapes.insert(header, (("train/epoch",), True))
    head_steps = [100 + 3 * t for t in range(n)]
    groups = []
    for i, (names, own) in enumerate(shapes):
        lines = [first + 4 * t + i for t in range(n)]
        values = [np.array([10.0 * line + j for line in lines]) for j in range(len(names))]
        times = np.array([1e9 + line for line in lines]) if timed and i == 2 else None
        read = Read(np.array(head_steps) if own else None, values, times, n)
        groups.append(console_segment.Group(np.array(lines), read, names, own, False, False))
    done = console_segment.combine(groups, last_step, None, 0)
    assert done is not None and isinstance(done.points, RowBlock) and done.points.size == 5 * n
    want = []
    for t in range(n):
        for i, (names, own) in enumerate(shapes):
            line = first + 4 * t + i
            step = head_steps[t] if i >= header else (head_steps[t - 1] if t else last_step)
            want += [(name, step, 10.0 * line + j, 1e9 + line if timed and i == 2 else None)
                     for j, name in enumerate(names)]
    before = CodedColumns(["eval/loss"], np.zeros(2, np.int32), np.array([1, 2]), np.array([0.5, 0.25]))
    stamped = CodedColumns(["eval/loss"], np.zeros(2, np.int32), np.array([1, 2]), np.array([0.5, 0.25]),
                           np.array([5.0, 6.0]))  # a part before with times: the block's untimed points NaN
    for got, skip in ((done.points.coded(), 0), (join([before, done.points]), 2), (join([stamped, done.points]), 2)):
        times = [None] * got.size if got.time_list is None else [None if x != x else x for x in got.time_list]
        points = list(zip([got.labels[c] for c in got.codes.tolist()], got.step_array.tolist(),
                          got.value_array.tolist(), times))
        assert points[skip:] == want and got.labels.count("train/loss") == 1
        assert (got.time_list is not None) == (timed or got.size > done.points.size and times[0] == 5.0)


def test_a_timed_header_without_values_keeps_the_turns_timed() -> None:
    """A header that prints a time and no metric ('[2024-07-24 11:20:07] [batch=N/T]:') before its record
    lines: the turns' points have times (NaN, none printed on their own lines), as when they were laid out
    side by side; not no times at all."""
    from stethoscope.logtext.coded import join

    n = 4
    head = Read(np.arange(n) + 1, [], np.arange(n) + 1e9, n)
    record = Read(None, [np.arange(n) / 10], None, n)
    groups = [console_segment.Group(np.arange(0, 2 * n, 2), head, (), True, False, False, 2),
              console_segment.Group(np.arange(1, 2 * n, 2), record, ("train/loss",), False, False, False, 2)]
    done = console_segment.combine(groups, None, None, 0)
    assert done is not None and done.points is not None
    for got in (done.points.coded(), join([done.points])):
        assert got.step_array.tolist() == [1, 2, 3, 4] and got.value_array.tolist() == [0.0, 0.1, 0.2, 0.3]
        assert got.time_list is not None and np.isnan(got.time_list).all()


def test_the_lines_of_a_cycle_read_in_whole_turns_are_not_checked_for_their_spacing_again(monkeypatch) -> None:
    """A cycle of k shapes read in whole turns: each shape's lines are every k-th line by construction
    (`_parts`, Group.period = k), so `combine` takes the turns without differencing every group's lines
    again (~2 ms of a Composer read); lines a rank filter dropped are checked (and do not take turns)."""
    k, n, start = 3, 50, 7
    ids = np.tile(np.arange(k, dtype=np.int8), n)
    assert console_segment._period(ids) == k
    parts = console_segment._parts(ids, k, start)

    def groups(period: int, keep: np.ndarray | None = None) -> list[console_segment.Group]:
        out = []
        kept = slice(None) if keep is None else keep  # a rank filter: the Read holds the kept lines' columns
        for i, at in enumerate(parts):
            read = Read((np.arange(n) + 100)[kept] if i == 1 else None, [(np.arange(n) + 10.0 * i)[kept]], None,
                        n, keep=keep)
            out.append(console_segment.Group(at, read, (f"m{i}",), i == 1, False, False, period))
        return out

    diffs: list[int] = []
    diff = np.diff
    monkeypatch.setattr(np, "diff", lambda a, *args, **kw: diffs.append(len(a)) or diff(a, *args, **kw))
    fast = console_segment.combine(groups(k), 99, None, 0)
    assert fast is not None and diffs == []
    slow = console_segment.combine(groups(0), 99, None, 0)
    assert slow is not None and len(diffs) == k
    got, want = fast.points.coded(), slow.points.coded()  # type: ignore[union-attr]
    assert got.labels == want.labels and (got.codes == want.codes).all()
    assert (got.step_array == want.step_array).all() and (got.value_array == want.value_array).all()
    assert got.step_array[:3].tolist() == [99, 100, 100]  # the record before the header: the last step
    dropped = console_segment.combine(groups(k, np.arange(n) % 7 != 3), 99, None, 0)
    assert dropped is not None and not isinstance(dropped.points, console_segment.TurnBlock)


_CYCLE = [b"[epoch=1][batch=%d/900]:", b"\t Train loss/train/total: 0.%d", b"\t Train lr: %d.0e-05", b"\t Train time: %d"]


@built
@pytest.mark.parametrize("seed", range(60))
def test_a_cycle_counted_ahead_gives_what_repeats_gives_from_each_of_its_lines(seed: int) -> None:
    """Composer's cycle is counted on a thread from its first line (`console_walk._Ahead`) while the first
    lines are read; the reader asks again from a later line, where a segment cut a turn (the turn then
    starts with a record line). From every line, with the turn that starts there, the count and the end
    are what `repeats` finds from that line; a turn of other shapes gets None (counted there)."""
    rng = random.Random(seed)
    k = rng.randint(2, 4)
    lines = [b"loading", b"Epoch 1"][:rng.randint(0, 2)]
    first = len(lines)
    lines += [_CYCLE[i % k] % rng.randint(0, 999) for i in range(k * rng.randint(0, 9) + rng.randint(0, k - 1))]
    lines += rng.choice([[], [b"Traceback"], [_CYCLE[0] % 1, b"oops"], [_CYCLE[k - 1] % 5]])
    data = b"\n".join(lines) + rng.choice([b"\n", b"", b"\n\t Train loss/train/total: 0."])
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    shapes = [shape_of(c % 1) + b"\n" for c in _CYCLE[:k]]
    matched = 0  # the lines that go on with the cycle, each ending in a newline
    while first + matched < len(lines) and starts[first + matched + 1] <= len(data) and \
            shape_of(lines[first + matched]) + b"\n" == shapes[matched % k]:
        matched += 1
    ahead = console_walk._Ahead(data, starts[first], b"".join(shapes))
    ahead.thread.join()
    for at in range(first, len(lines) + 1):
        q = min(starts[at], len(data))
        turn = b"".join(shapes[(at - first) % k:] + shapes[:(at - first) % k])
        taken = ahead.take(data, q, turn)
        if at - first <= matched:  # a line of the cycle
            assert taken == linescan.repeats(data, q, turn), (at, taken)
        else:
            assert taken is None
        assert ahead.take(data, q, b"Epoch \n" * k) is None


@built
def test_columns_and_shapes_read_in_two_halves_are_read_as_in_one(monkeypatch) -> None:
    """Big reads of the scanner (a window's lines by their starts, a segment's shapes) are split in two halves
    read side by side on two threads; the rows and the shape text are those of one read, a line that does
    not read still makes the whole read None, and no thread is left running."""
    data = _keras(3000)
    starts = np.array([0] + [i + 1 for i, c in enumerate(data) if c == 10][:-1], dtype=np.int64)[9:999]
    picks = ([0, 7, 9], "iff", [False, False, False])
    monkeypatch.setattr(linescan, "HALVES_LINES", 1 << 40)
    monkeypatch.setattr(linescan, "HALVES_BYTES", 1 << 40)
    whole, text = linescan.columns(data, 10, *picks, starts), linescan.shapes(data, 5, len(data) - 3)
    cut = np.append(starts, data.find(b"loss"))  # a line read from its middle: three tokens, not ten
    broken = linescan.columns(data, 10, *picks, cut)
    monkeypatch.setattr(linescan, "HALVES_LINES", 16)
    monkeypatch.setattr(linescan, "HALVES_BYTES", 64)
    threads = threading.active_count()
    assert whole is not None and whole.shape == (990, 3) and broken is None
    assert np.array_equal(linescan.columns(data, 10, *picks, starts), whole)
    assert linescan.columns(data, 10, *picks, cut) is None
    assert linescan.shapes(data, 5, len(data) - 3) == text and threading.active_count() == threads
