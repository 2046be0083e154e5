"""How the console reader walks a whole log: a long run of lines of one shape (or a cycle of a few shapes,
Composer's) is found and read at once, the lines between long runs a window at a time.

Where the native scanner was built, a run (or a cycle) is found over the log itself
(`linescan.repeats`: one pass that compares each line's shape with the run's, writing none), so a log
that is one long run never has its shapes made; the shapes of the other lines are made a segment of
the log at a time (from `FIRST_SEGMENT_BYTES`, doubling up to `SEGMENT_BYTES` while no run takes over; a
thread making the next segment's shapes meanwhile cost more than it saved on two busy cores). Without the
scanner, the shapes are made and counted in Python (`console_runs.repeats`), a segment at a time too. Either way the reader gets the same lines in the same
runs, windows and stretches, except that a run may be cut where a segment ends (the next part is read
as its own run: the same points).

A log that opens with a cycle of shapes not yet learnt (Composer's first header and record lines) has its
cycle counted over the log on a thread at once (`_Ahead`, the scanner's `repeats` without the GIL), while
its first lines are read and numpy is imported; the count is used when the cycle, learnt, is read from a
turn further on (the same count `repeats` gives from there), not made again after them.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from stethoscope.logtext import console_arrow, linescan
from stethoscope.logtext.console_runs import Lines, advance, find_cycle, repeats, shape_of, window_at
from stethoscope.logtext.console_speed import cut_by_run

if TYPE_CHECKING:
    from stethoscope.logtext.console_reader import ConsoleReader

LONG_RUN = 64  # a run of a shape this long is read alone; shorter ones are read with their neighbours
WINDOW_BYTES = 1 << 22  # the lines between long runs: shapes this many bytes at a time, at most
MIN_WINDOW_BYTES = 1 << 12  # ... and at first, doubling while no long run cuts a window short
SEGMENT_BYTES = 1 << 23  # the shapes of the lines between long runs: made this many bytes of the log at a time
FIRST_SEGMENT_BYTES = 1 << 16  # ... and at first (or after a run), doubling from one segment to the next
_HEAD_BYTES = 9 * 256  # the lines a cycle is looked for in (console_runs.MAX_PERIOD + 1 lines of a few hundred bytes)
AHEAD_USE_BYTES = 1 << 24  # a cycle counted ahead serves a turn at most this far on (its lines are counted)


def walk(reader: ConsoleReader, data: bytes) -> int:
    """Read `data` (the whole log, `reader._data`) run by run, window by window; the number of lines."""
    at = q = 0  # a line, where it starts in `data`
    reader.window_bytes = reader.window_bytes or MIN_WINDOW_BYTES
    native = linescan.available()
    size = FIRST_SEGMENT_BYTES if native else SEGMENT_BYTES  # small at first: a run may take over at its end
    ahead: list[_Ahead] = []  # the first cycle, counted on a thread before its shapes are learnt
    try:
        while True:
            if native:
                took = _native_run(reader, data, at, q, ahead)
                if took is not None:
                    at, q, size = *took, FIRST_SEGMENT_BYTES
                    continue
            cut = _segment_end(data, q, size)
            shapes = linescan.shapes(data, q, cut) if native else shape_of(data[q:cut])
            at, q = _segment(reader, data, shapes, at, q, cut, native)
            if cut == len(data):
                return at
            size = min(SEGMENT_BYTES, 2 * size)
    finally:
        for started in ahead:
            started.thread.join()


class _Ahead:
    """`linescan.repeats(data, q, unit)` on a thread of its own (it releases the GIL), and what it gives
    from a later line of the same cycle (`take`)."""

    def __init__(self, data: bytes, q: int, unit: bytes) -> None:
        self.q, self.lines, self.found = q, [line + b"\n" for line in unit.split(b"\n")[:-1]], None
        self.thread = threading.Thread(target=self._count, args=(data, unit), name="stethoscope-scan", daemon=True)
        self.thread.start()

    def _count(self, data: bytes, unit: bytes) -> None:
        try:
            found = linescan.repeats(data, self.q, unit)
            self.found = (*found, self._after(data, found[1]))
        except Exception:  # noqa: BLE001 - the count is made again where it is wanted
            self.found = None

    def _after(self, data: bytes, end: int) -> int:
        """How many lines from data[end] go on with the cycle's (fewer than a turn: it broke there)."""
        m = 0
        while m + 1 < len(self.lines) and linescan.repeats(data, end, b"".join(self.lines[:m + 1]))[0]:
            m += 1
        return m

    def take(self, data: bytes, q: int, unit: bytes) -> tuple[int, int] | None:
        """`linescan.repeats(data, q, unit)` where data[q] is a line of the cycle counted and `unit` its turn
        from that line (the cycle turned: Composer's record lines first where a segment cut a turn); else
        None. The cycle's lines from its start, `count` turns and `after` lines more, go on from the line at
        q for as many whole turns as fit."""
        k = len(self.lines)
        turned = [r for r in range(k) if unit == b"".join(self.lines[r:] + self.lines[:r])]
        if not turned or not self.q <= q <= self.q + AHEAD_USE_BYTES:
            return None
        self.thread.join()
        if self.found is None:
            return None
        count, end, after = self.found
        at = data[self.q:q].count(b"\n")  # the line at q, from the cycle's start
        if at > count * k + after or at % k not in turned:
            return None
        turns = (count * k + after - at) // k
        shift = at + turns * k - count * k  # the line after the last turn, from the one at `end`
        if shift >= 0:
            return turns, linescan.skip_lines(data, end, shift)[1] if shift else end
        for _ in range(-shift):
            end = data.rfind(b"\n", 0, end - 1) + 1
        return turns, end


def _native_run(reader: ConsoleReader, data: bytes, at: int, q: int,
                ahead: list[_Ahead]) -> tuple[int, int] | None:
    """(line, offset) after a long run or cycle that starts at data[q], read; None when none starts there.
    The first cycle whose shapes are not learnt yet is counted on a thread meanwhile (`_Ahead`)."""
    head = linescan.shapes(data, q, min(len(data), q + _HEAD_BYTES))
    end = head.find(b"\n")
    if end < 0:
        return None
    shape = head[:end]
    k, q_end = linescan.repeats(data, q, shape + b"\n")
    if k >= console_arrow.MIN_LINES:  # a run a window would stop at (a shorter one is read in its segment)
        reader._run(at, at + k, shape, q, q_end)
        return at + k, q_end
    ends: dict[bytes, int] = {}

    def count(unit: bytes) -> int:
        taken = ahead[0].take(data, q, unit) if ahead else None
        found, ends[unit] = taken if taken is not None else linescan.repeats(data, q, unit)
        return found

    def count_ahead(unit: bytes) -> int:
        if len(set(unit.split(b"\n"))) > 2:  # shapes that differ (the same one twice is a run, read as one)
            ahead.append(_Ahead(data, q, unit))
        return 0  # not read now: counted meanwhile

    cycle = find_cycle(head, 0, reader._planned, console_arrow.MIN_LINES, count)
    if cycle is None:
        if not ahead:  # a cycle of shapes not learnt yet: counted while its first lines teach them
            find_cycle(head, 0, lambda shape: b"\r" not in shape, console_arrow.MIN_LINES, count_ahead)
        return None
    kinds, cycles = cycle
    q_end = ends[b"\n".join(kinds) + b"\n"]
    return _stretch_cycle(reader, Lines(data, at, q, q_end, count=cycles * len(kinds)), kinds, cycles)


def _segment_end(data: bytes, q: int, size: int) -> int:
    """Where the segment from data[q] ends: past a newline about `size` bytes on, or at the end of the data."""
    if len(data) - q <= size:
        return len(data)
    cut = data.rfind(b"\n", q, q + size) + 1
    if cut <= q:  # one line longer than a segment
        cut = data.find(b"\n", q + size) + 1
    return cut if cut > q else len(data)


def _segment(reader: ConsoleReader, data: bytes, shapes: bytes, at: int, q: int, cut: int,
             native: bool) -> tuple[int, int]:
    """The lines of data[q:cut], whose shapes are `shapes`: runs, cycles and windows; (line, offset) after
    them, or before a run that goes on past the segment (`native`: the scanner finds its end). The last
    segment (cut at the end of the data) ends with the text after the last newline."""
    where = 0  # where the line at data[q] starts in `shapes`
    per_byte = (cut - q) / max(1, len(shapes))  # bytes of the log per byte of shapes (digits come back)
    while True:
        end = shapes.find(b"\n", where)
        if end < 0:
            if cut == len(data):  # the text after the last newline
                reader._run(at, at + 1, shapes[where:], q, len(data) + 1)
                at += 1
            return at, q
        shape = shapes[where:end]
        k = repeats(shapes, where, shape + b"\n")
        if k >= LONG_RUN:
            after = where + k * (len(shape) + 1)
            if native and after == len(shapes) and cut < len(data) and where > 0:
                return at, q  # read from its start by `_native_run`, or in a segment of its own
            q_end = cut if after == len(shapes) else advance(data, q, k, after - where)
            reader._run(at, at + k, shape, q, q_end)
            at, where, q = at + k, after, q_end
            continue
        cycle = find_cycle(shapes, where, reader._planned, LONG_RUN)
        if cycle is not None:  # Composer's header + record lines, repeated: one stretch, no window
            kinds, count = cycle
            span = count * (sum(map(len, kinds)) + len(kinds))
            n = count * len(kinds)  # lines found on first use (rows of a cycle need none)
            lines = Lines(data, at, q, advance(data, q, n, int(span * per_byte)), count=n)
            at, q = _stretch_cycle(reader, lines, kinds, count)
            where += span
            continue
        ids, kinds, span, short = window_at(shapes, where, reader.window_bytes, console_arrow.MIN_LINES,
                                            native and cut < len(data))
        # a window no long run cut short (the segment's end may have): the next is twice as big
        short = short and cut_by_run(shapes, where + span, console_arrow.MIN_LINES)
        reader.window_bytes = MIN_WINDOW_BYTES if short else min(WINDOW_BYTES, reader.window_bytes * 2)
        lines = Lines.of(data, at, q, ids.size, int(span * per_byte))
        reader._window(lines, ids, kinds)
        at, where, q = at + ids.size, where + span, lines.q_end


def _stretch_cycle(reader: ConsoleReader, lines: Lines, kinds: list[bytes], cycles: int) -> tuple[int, int]:
    """`cycles` turns of the shapes `kinds` from `lines.first`, read as one stretch; (line, offset) after them."""
    import numpy as np

    ids = np.tile(np.arange(len(kinds), dtype=np.int8), cycles)  # (MAX_PERIOD shapes at most) a byte a line
    reader._stretch(lines, lines.first, lines.first + cycles * len(kinds), ids, kinds)
    return lines.first + cycles * len(kinds), lines.q_end
