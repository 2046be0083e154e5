"""Work the console reader no longer does (issue 28.4, console-speed), each with the proof that what it reads
is the same: windows of interleaved shapes keep their size where a segment of shapes ends
(`logtext/console_speed.py`), and `twice_logged.once` marks the steps to look into without `np.isin`."""

from __future__ import annotations

import io
import random
import sys
from pathlib import Path

import numpy as np
import pytest

from stethoscope.logtext import console_runs, console_speed, console_walk, linescan
from stethoscope.logtext.coded import CodedColumns
from stethoscope.logtext.console_reader import ConsoleReader
from stethoscope.logtext.twice_logged import once

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import import_speed  # noqa: E402

built = pytest.mark.skipif(not linescan.available(), reason="the line scanner was not built (no C compiler)")


def _log(shape: str, lines: int) -> bytes:
    rng, out = random.Random(5), io.StringIO()
    for s in range(1, lines + 1):
        import_speed.CONSOLE_SHAPES[shape](out, s, rng)
    return out.getvalue().encode()


def _read(data: bytes, monkeypatch, old_rule: bool) -> tuple[list, int]:
    """The points, warnings, meta and counts read from `data`, and how many windows were made."""
    windows: list[int] = []
    window_at = console_walk.window_at
    monkeypatch.setattr(console_walk, "window_at", lambda *a: windows.append(1) or window_at(*a))
    if old_rule:  # every window cut short starts small again (what the walk did before)
        monkeypatch.setattr(console_walk, "cut_by_run", lambda *a: True, raising=False)
    reader = ConsoleReader("log")
    reader.feed(data)
    run = reader.result()
    c = run.columns
    got = [list(c.names), list(c.steps), list(c.values), list(c.times), run.warnings, run.meta, reader.lines,
           reader.step_lines]
    monkeypatch.undo()
    return got, len(windows)


@built
@pytest.mark.parametrize("shape", ["Keras progress", "dict repr (HF, no step)", "key=value"])
def test_a_window_cut_by_the_segments_end_does_not_start_small_again(shape: str, monkeypatch) -> None:
    """Keras' redrawn bar (4 shapes in runs of 1-900 lines) is read in windows. Each segment of shapes made
    so far ends inside a run, which cuts the window there; that used to start the next window at 4 KiB again
    (then 8, 16, ...), 3.5x the windows on the 1M-line bench log. The same points, warnings and counts with
    far fewer windows; logs of one long run (dicts, key=value) are not read in windows either way."""
    data = _log(shape, 20_000)
    sizes = {"FIRST_SEGMENT_BYTES": 1 << 14, "SEGMENT_BYTES": 1 << 16, "MIN_WINDOW_BYTES": 1 << 12}

    def read(old_rule: bool) -> tuple[list, int]:
        for name, value in sizes.items():
            monkeypatch.setattr(console_walk, name, value)
        return _read(data, monkeypatch, old_rule)

    new, windows = read(False)
    old, old_windows = read(True)
    assert new == old
    assert len(set(new[1])) >= 10_000
    if shape == "Keras progress":
        assert old_windows >= 30 and 3 * windows <= 2 * old_windows, (windows, old_windows)
    else:
        assert windows <= old_windows


def test_cut_by_run_tells_a_long_run_from_the_segments_end() -> None:
    shapes = b"a\n" * 3 + b"b\n" * 5
    assert not console_speed.cut_by_run(shapes, 6, 10)  # 5 b's to the end, fewer than 10: the segment's end
    assert console_speed.cut_by_run(shapes, 6, 5)  # a run of 5 is long at 5
    assert console_speed.cut_by_run(shapes + b"c\n", 6, 10)  # the run ends before the shapes do
    assert console_speed.cut_by_run(b"a\nb", 2, 10)  # no newline after: as before (start small)
    assert console_runs.repeats(shapes, 6, b"b\n") == 5


def _once_before(columns: CodedColumns) -> CodedColumns:
    """`twice_logged.once` as it was (np.isin over every point), kept to compare."""
    steps, codes = columns.step_array, columns.codes
    same = steps[1:] == steps[:-1]
    descent = same & (codes[1:] <= codes[:-1])
    if not descent.any():
        return columns
    run = np.concatenate(([0], np.cumsum(~same, dtype=np.int64)))
    key = run * (len(columns.labels) + 1) + codes
    at = np.flatnonzero(np.isin(run, np.unique(run[1:][descent])))
    order = at[np.lexsort((columns.value_array[at], key[at]))]
    twin = (key[order][1:] == key[order][:-1]) & (columns.value_array[order][1:] == columns.value_array[order][:-1])
    if not twin.any():
        return columns
    keep = np.ones(steps.size, dtype=bool)
    keep[order[1:][twin]] = False
    return CodedColumns(columns.labels, codes[keep], steps[keep], columns.value_array[keep], None)


@pytest.mark.parametrize("seed", range(40))
def test_twice_logged_points_are_the_ones_np_isin_found(seed: int) -> None:
    """Random logs of 1-4 names a step, steps that repeat (a resume), points printed twice (same name and
    value at the same step), a name again with another value, NaN values: the same points kept."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 400))
    steps = np.sort(rng.integers(0, n // 3 + 2, n)) if seed % 3 else rng.integers(0, 20, n)
    codes = rng.integers(0, 4, n).astype(np.int32)
    values = rng.integers(0, 3, n).astype(np.float64)
    values[rng.random(n) < 0.05] = np.nan
    columns = CodedColumns(["a", "b", "c", "d"], codes, steps, values, None)
    got, want = once(columns), _once_before(columns)
    assert (got is columns) == (want is columns)
    for a, b in ((got.codes, want.codes), (got.step_array, want.step_array), (got.value_array, want.value_array)):
        assert a.tobytes() == b.tobytes()


def _columns(run) -> list:
    c = run.columns
    return [list(c.names), list(c.steps), [v if v == v else "nan" for v in c.values],
            [t if t is None or t == t else "nan" for t in c.times]]


@pytest.mark.parametrize("native", ["1", "0"], ids=["scanner", "python"])
@pytest.mark.parametrize("shape", list(import_speed.CONSOLE_SHAPES))
def test_a_long_runs_rows_are_kept_as_parts_and_read_the_same(shape: str, native: str, tmp_path, monkeypatch) -> None:
    """The console reader hands a long run's rows over as they are (`PartsColumns`, as the Megatron reader
    does), not laid out as points: the same points, meta and warnings as `join`'s, a table (the diagnosis')
    equal to the laid-out points' pivot, and no layout at all on the way for a log of one long run."""
    from stethoscope.diagnose.table import Table
    from stethoscope.importers.console import ConsoleImporter
    from stethoscope.logtext import coded, coded_parts

    monkeypatch.setenv("STETHOSCOPE_NATIVE", native)
    path = tmp_path / "train.log"
    path.write_bytes(_log(shape, 5000))
    laid: list[int] = []
    real_join = coded.join
    monkeypatch.setattr(coded_parts, "join", lambda parts: laid.append(len(parts)) or real_join(parts))
    run = ConsoleImporter().read(path)
    lazy = isinstance(run.columns, coded_parts.PartsColumns) and not laid
    table = Table.from_columns(run.columns)
    monkeypatch.setattr(console_speed, "join", real_join)
    before = ConsoleImporter().read(path)
    assert not isinstance(before.columns, coded_parts.PartsColumns)
    assert (run.meta, run.warnings, run.n_points, run.steps) == (before.meta, before.warnings, before.n_points,
                                                                 before.steps)
    want = Table.from_columns(before.columns)
    assert table.names == want.names and table.steps.tobytes() == want.steps.tobytes()
    assert np.array_equal(table.values, want.values, equal_nan=True) and (table.present == want.present).all()
    assert _columns(run) == _columns(before)
    if shape in ("key: value (torchtitan)", "| key value | (llm.c)", "key=value", "dict repr (HF, no step)") and \
            native == "1":
        assert lazy  # one long run: read, checked for twice-logged points and tabled without a layout


def _descends_laid_out(columns) -> bool:
    from stethoscope.logtext.coded import join

    laid = join(columns.parts)
    steps, codes = laid.step_array, laid.codes
    return bool(((steps[1:] == steps[:-1]) & (codes[1:] <= codes[:-1])).any())


def _random_parts(seed: int) -> list:
    """Random parts (rows of 1-3 names, some a name again or out of order, steps that repeat within a part or
    across a part's edge; a few points read line by line)."""
    from stethoscope.logtext.coded import RowBlock

    rng = random.Random(seed)
    names = ["a", "b", "c", "d"]
    parts, step = [], 0
    for _ in range(rng.randint(1, 4)):
        if rng.random() < 0.25:  # turns of a cycle (Composer's header and record lines)
            from stethoscope.logtext.console_segment import TurnBlock

            turn = [rng.choice(names) for _ in range(rng.randint(1, 4))]
            labels = list(dict.fromkeys(turn))
            n = rng.randint(1, 5)
            head = np.array(sorted(step + rng.randrange(2 * n) for _ in range(n)), np.int64)
            steps = [head if rng.random() < 0.7 else np.maximum(head - 1, 0) for _ in turn]
            parts.append(TurnBlock(labels, np.array([labels.index(x) for x in turn], np.int32), steps,
                                   [np.arange(n, dtype=np.float64)] * len(turn), None, n))
            step = int(max(column[-1] for column in steps)) + rng.choice((0, 1, 5))
            continue
        if rng.random() < 0.3:
            n = rng.randint(1, 5)
            steps = [step + rng.choice((0, 0, 1)) * k for k in range(n)]
            parts.append(CodedColumns(names, np.array([rng.randrange(4) for _ in range(n)], np.int32),
                                      np.array(steps, np.int64), np.array([rng.randrange(3) for _ in range(n)],
                                                                          dtype=np.float64), None))
        else:
            width = rng.randint(1, 3)
            row = rng.sample(names, width) if rng.random() < 0.8 else [names[0]] * width
            n = rng.randint(1, 6)
            steps = np.array(sorted(step + rng.randrange(3 * n) for _ in range(n)), np.int64)
            if rng.random() < 0.5:
                steps = np.unique(steps)
            parts.append(RowBlock(row, steps, [np.arange(steps.size, dtype=np.float64)] * width, None))
        step = int(parts[-1].steps[-1] if isinstance(parts[-1], RowBlock) else parts[-1].step_array[-1])
        step += rng.choice((0, 1, 5))
    return parts


def test_descends_tells_what_the_laid_out_points_tell() -> None:
    """`descends` from the parts (which replaces laying the points out in `twice_logged.once`): never False
    where the laid-out points have a step repeating a name code (rows, turns) or a twin (a part of points
    looked into alone); `once` of the parts gives `once` of the laid-out points, on 300 random logs' parts."""
    from stethoscope.logtext.coded import join
    from stethoscope.logtext.coded_parts import PartsColumns

    seen = []
    for seed in range(300):
        parts = _random_parts(seed)
        laid = join(PartsColumns(parts).parts)
        got = console_speed.descends(PartsColumns(parts))
        twin = once(laid) is not laid
        if any(not isinstance(part, CodedColumns) for part in parts):
            assert got or not twin, seed  # False only where the laid-out points hold no twin
            seen.append((got, twin, _descends_laid_out(PartsColumns(parts))))
        else:  # no rows among the parts (the reader keeps no such parts): the points decide
            assert got
        kept, want = once(PartsColumns(parts)), once(laid)
        for a, b in ((kept.codes, want.codes), (kept.step_array, want.step_array), (kept.value_array, want.value_array)):
            assert a.tobytes() == b.tobytes(), seed
    assert sum(1 for got, _, _ in seen if not got) >= 20 and sum(1 for _, twin, _ in seen if twin) >= 10
    assert any(not got and descent for got, _, descent in seen)  # a part looked into alone spared the layout
