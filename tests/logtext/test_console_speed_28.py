"""Issue 28.4 (speed-28): the Keras progress-line and Composer block shapes read by the fast path (whole runs,
windows and cycles at once; the native scanner or not) give the runs the general path gives (every line
through the line parser, one at a time); and the shortcuts taken on the way (`EpochCounter.reads` on steps
that only rise, `_period` a piece at a time, `combine` sorting a bar's lines once) answer as the long way."""

from __future__ import annotations

import io
import random
import sys
from pathlib import Path

import numpy as np
import pytest

from stethoscope.logtext import console_segment, linescan
from stethoscope.logtext.console_epochs import EpochCounter
from stethoscope.logtext.console_reader import ConsoleReader

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import import_speed  # noqa: E402


def _log(shape: str, lines: int, seed: int) -> bytes:
    rng, out = random.Random(seed), io.StringIO()
    for s in range(1, lines + 1):
        import_speed.CONSOLE_SHAPES[shape](out, s, rng)
    return out.getvalue().encode()


def _run(reader: ConsoleReader) -> list:
    run = reader.result()
    c = run.columns
    return [list(c.names), list(c.steps), list(c.values), list(c.times), run.warnings, run.meta, reader.lines,
            reader.step_lines]


def _fast(data: bytes) -> list:
    reader = ConsoleReader("log")
    reader.feed(data)
    return _run(reader)


def _general(data: bytes) -> list:
    reader = ConsoleReader("log")
    for number, line in enumerate(data.split(b"\n")[:-1], 1):
        reader.line(number, line)
    return _run(reader)


@pytest.mark.parametrize("native", [True, False], ids=["scanner", "pure-python"])
@pytest.mark.parametrize("shape,lines", [("Keras progress", 12_000), ("Composer blocks", 24_000)])
def test_the_fast_path_reads_what_the_general_path_reads(shape: str, lines: int, native: bool, monkeypatch) -> None:
    """The bench's Keras log (a redrawn bar, 4 shapes in runs of 1-900 lines, read in windows) and Composer's
    (a `[batch=N/T]:` header then one metric a line, read as a cycle's turns): the same names, steps, values,
    times, warnings and counts as line by line, with the native scanner and without it."""
    if native and not linescan.available():
        pytest.skip("the line scanner was not built (no C compiler)")
    if not native:
        monkeypatch.setenv("STETHOSCOPE_NATIVE", "0")
    data = _log(shape, lines, 7)
    fast, general = _fast(data), _general(data)
    assert fast == general
    assert len(set(fast[1])) >= (lines // 4 if shape == "Composer blocks" else lines - 100)


def _reads_the_long_way(counter: EpochCounter, steps: np.ndarray, last_step: int | None) -> bool:
    """`EpochCounter.reads` as it was before its shortcut for rising steps."""
    if counter.state is not None and counter.state[1]:
        return False
    raw = np.asarray(steps, dtype=np.int64)
    if last_step is not None:
        raw = np.concatenate(([last_step], raw))
    diffs = np.diff(raw)
    ahead = diffs[diffs > 0]
    cadence = max(int(ahead.max()) if ahead.size else 1, counter.cadence)
    if ((diffs < 0) & (raw[1:] <= cadence)).any() or not diffs.all():
        return False
    counter.cadence = int(ahead[-1]) if ahead.size else counter.cadence
    if counter.state is not None:
        counter.state = (counter.state[0], 0, int(raw[-1]))
    return True


def test_epoch_counter_reads_rising_steps_as_the_long_way() -> None:
    """Rising steps (Composer's headers), steps that repeat, fall back near zero or far from it, one step,
    with and without a step before them and a state: the same answer, cadence and state."""
    rng = random.Random(11)
    for _ in range(3000):
        n = rng.choice([1, 2, 3, 10, 200])
        start = rng.randint(0, 50)
        steps = np.cumsum([start] + [rng.choice([1, 1, 2, 5, 100]) for _ in range(n - 1)]).astype(np.int64)
        if rng.random() < 0.4 and n > 1:
            steps[rng.randrange(1, n)] = rng.choice([0, 1, int(steps[0]), int(steps[-1])])
        last = rng.choice([None, None, 0, int(steps[0]) - 1, int(steps[0]), int(steps[0]) + 3])
        state = rng.choice([None, (1, 0, 5), (2, 0, 7)])
        cadence = rng.choice([1, 3, 40])
        a, b = EpochCounter(), EpochCounter()
        a.state = b.state = state
        a.cadence = b.cadence = cadence
        assert a.reads(steps, last) == _reads_the_long_way(b, steps, last)
        assert (a.cadence, a.state) == (b.cadence, b.state)


def test_period_a_piece_at_a_time_as_at_once() -> None:
    rng = random.Random(3)
    for _ in range(500):
        k = rng.randint(1, 6)
        ids = np.tile(np.arange(k, dtype=rng.choice([np.int8, np.int32])), rng.choice([1, 2, 7, 20_000, 70_000]))
        if rng.random() < 0.6:
            ids[rng.randrange(ids.size)] = rng.randrange(k + 1)
        if rng.random() < 0.2 and ids.size > 1:
            ids = ids[:-1]
        m = int(ids.max()) + 1  # (as `_period` made it at once)
        want = m if ids.size % m == 0 and (ids.reshape(-1, m) == np.arange(m, dtype=ids.dtype)).all() else 0
        assert console_segment._period(ids) == want


def test_bar_lines_sorted_once_give_the_steps_of_two_sorts(monkeypatch) -> None:
    """Keras' window: every step line is a bar's, in 3 groups; `combine` keeps the one sort it makes for the
    bar's counters for the step lines' order (it sorted them a second time): the same steps, points and bar."""
    from stethoscope.logtext.console_tokens import Read

    rng = random.Random(5)
    for _ in range(50):
        owner = [rng.randrange(3) for _ in range(rng.randint(3, 400))]
        counters = [(i % 37) + 1 for i in range(len(owner))]
        groups = []
        for g in range(3):
            lines = np.array([i for i, o in enumerate(owner) if o == g] or [len(owner) + g], dtype=np.int64)
            read = Read(np.array([counters[i] if i < len(owner) else 1 for i in lines]),
                        [np.arange(lines.size, dtype=np.float64)], None, lines.size)
            groups.append(console_segment.Group(lines, read, ("train/loss",), True, True, False))
        done = console_segment.combine(groups, None, None, 0)
        argsorts: list[int] = []
        sort = np.argsort
        monkeypatch.setattr(console_segment.np, "argsort", lambda *a, **k: argsorts.append(1) or sort(*a, **k))
        again = console_segment.combine(groups, None, None, 0)
        monkeypatch.undo()
        assert len(argsorts) == 1
        assert done is not None and again is not None
        assert done.steps.tolist() == again.steps.tolist() and done.bar == again.bar
        assert done.points.step_array.tolist() == again.points.step_array.tolist()
        lines = np.concatenate([g.lines for g in groups])
        steps = np.concatenate([np.asarray(g.read.steps) for g in groups])
        order = np.argsort(lines, kind="stable")
        want, _ = console_segment.bar_steps(steps[order], None)
        assert done.steps.tolist() == want.tolist()
