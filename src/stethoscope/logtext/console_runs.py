"""Where a console log's runs are, found in the raw bytes: a run of one shape (or a cycle of a few) by
counting copies of it in the log's shapes, the byte range of k lines by counting newlines, and `Lines`,
the lines of a range split on first use. No Python per line on a long run: each step is a C-level search
over a block that doubles, then halves."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import repeat
from operator import itemgetter
from typing import Any

from stethoscope.logtext import linescan

MAX_PERIOD = 8  # the longest cycle of shapes found like a run


def repeats(text: bytes, at: int, unit: bytes) -> int:
    """How many times `unit` repeats in `text` from `at`: blocks of doubling size, then halving, each
    checked by counting the unit in the block (k copies in k units' bytes tile it exactly; a search at C
    speed that allocates nothing); the last doubling block is cut to what the text has left, so a run to
    the end of the file is checked in about one pass."""
    count, size, block = 0, len(unit), 1
    left = (len(text) - at) // size
    while count < left:
        take = min(block, left - count)
        start = at + count * size
        if text.count(unit, start, start + take * size) != take:
            break
        count += take
        block *= 2
    else:
        return count
    while block > 1:  # what is left is shorter than the block that failed: halve it
        block //= 2
        start = at + count * size
        if count + block <= left and text.count(unit, start, start + block * size) == block:
            count += block
    return count


def advance(data: bytes, q: int, k: int, guess: int) -> int:
    """Where the line k lines after the one at `q` starts (len(data) + 1 past the last line): newlines
    counted at memchr speed in a range that doubles from `guess` bytes, then halves onto the k-th."""
    if k <= 0:
        return q
    if linescan.available():  # one memchr pass
        found, end = linescan.skip_lines(data, q, k)
        return end if found == k else len(data) + 1
    lo, below, hi = q, 0, min(len(data), q + max(guess, 64))
    seen = data.count(b"\n", q, hi)
    while seen < k and hi < len(data):
        lo, below = hi, seen
        hi = min(len(data), q + 2 * (hi - q))
        seen = below + data.count(b"\n", lo, hi)
    if seen < k:
        return len(data) + 1
    while hi - lo > 1:  # count(q, lo) == below < k <= seen == count(q, hi)
        mid = (lo + hi) // 2
        at_mid = below + data.count(b"\n", lo, mid)
        if at_mid >= k:
            hi, seen = mid, at_mid
        else:
            lo, below = mid, at_mid
    return hi


class Lines:
    """Lines first.. of a log that sit at data[q:q_end], split on first use, by their index in the log."""

    def __init__(self, data: bytes, first: int, q: int, q_end: int, items: list[bytes] | None = None,
                 count: int | None = None) -> None:
        self.data, self.first, self.q, self.q_end, self.count = data, first, q, q_end, count
        self._items = items
        self._starts: Any = None

    @classmethod
    def of(cls, data: bytes, first: int, q: int, count: int, guess: int) -> Lines:
        """The `count` lines from data[q], each ending in a newline, found in a range that grows from
        `guess` bytes until it holds them: by their newlines (the native scanner's memchr, else numpy; the
        lines are split only if a slow path asks for them), else split."""
        import numpy as np

        if linescan.available():
            starts = linescan.line_starts(data, q, count)
            if starts.size == count + 1:
                lines = cls(data, first, q, int(starts[-1]))
                lines._starts = starts
                return lines
            guess = len(data) - q  # the last line has no newline
        size = guess + guess // 4 + 64
        while True:
            end = min(len(data), q + size)
            newlines = np.flatnonzero(np.frombuffer(data, np.uint8, count=end - q, offset=q) == 10)
            if newlines.size >= count or end == len(data):
                break
            size *= 2
        if newlines.size >= count:
            lines = cls(data, first, q, q + int(newlines[count - 1]) + 1)
            lines._starts = np.concatenate(([q], newlines[:count] + (q + 1)))
            return lines
        size = 2 * guess + 64  # the last line has no newline
        while len(part := data[q: q + size].split(b"\n", count)) <= count and q + size < len(data):
            size *= 2
        items = part[:count]
        return cls(data, first, q, q + sum(map(len, items)) + len(items), items)

    def starts(self, at: Any) -> Any:
        """Where the lines at the indices `at` (a numpy array) start in the data."""
        return self._line_starts()[at - self.first]

    def items(self) -> list[bytes]:
        if self._items is None:
            self._items = self.data[self.q: self.q_end].split(b"\n")
            if self.q_end <= len(self.data):
                self._items.pop()  # the empty text after the region's last newline
        return self._items

    def __getitem__(self, i: int) -> bytes:
        return self.items()[i - self.first]

    def slice(self, a: int, b: int) -> list[bytes]:
        return self.items()[a - self.first: b - self.first]

    def pick(self, at: Any) -> list[bytes]:
        """The lines at the indices `at` (a numpy array, ascending)."""
        items = self.items()
        if at.size > 2 and at[1] > at[0] and ((at[1:] - at[:-1]) == at[1] - at[0]).all():  # every k-th line
            return items[int(at[0]) - self.first: int(at[-1]) - self.first + 1: int(at[1] - at[0])]
        local = (at - self.first).tolist()
        return list(itemgetter(*local)(items)) if len(local) > 1 else [items[local[0]]]

    def span(self, a: int, b: int) -> tuple[int, int]:
        """Where lines a..b sit in the data (the end: past the newline of line b - 1)."""
        if self._starts is None and (a, b) == (self.first, self.first + (self.count or -1)):  # not split
            return self.q, self.q_end
        starts = self._line_starts()
        return int(starts[a - self.first]), int(starts[b - self.first])

    def _line_starts(self) -> Any:
        """Where each line starts in the data, and past the last one's newline (found once)."""
        if self._starts is None:
            import numpy as np

            items = self.items()
            self._starts = np.zeros(len(items) + 1, dtype=np.int64)
            np.cumsum(np.fromiter(map(len, items), dtype=np.int64, count=len(items)) + 1, out=self._starts[1:])
            self._starts += self.q
        return self._starts


def line_kinds(text: bytes, start: int, end: int) -> tuple[Any, Any, list[bytes]]:
    """The lines of text[start:end] numbered by their text (`linescan.line_kinds`: int32 ids, where each
    line starts and `end + 1`, the distinct lines), in C where the scanner was built."""
    if linescan.available():
        return linescan.line_kinds(text, start, end)
    import numpy as np

    lines = text[start:end].split(b"\n")
    index: dict[bytes, int] = {}
    ids = np.fromiter(map(index.setdefault, lines, map(len, repeat(index))), dtype=np.int32, count=len(lines))
    starts = np.zeros(len(lines) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, lines), np.int64, count=len(lines)) + 1, out=starts[1:])
    return ids, starts + start, list(index)


def window_at(shapes: bytes, where: int, size: int, long_run: int,
              open_end: bool = False) -> tuple[Any, list[bytes], int, bool]:
    """The lines whose shapes lie in `shapes[where: where + size]` (at least one), up to where a run of one
    shape at least `long_run` lines long starts after the first line (read as a run, not in a window: a
    long run between the lines that end Keras' epochs); the window's last run is measured in `shapes`,
    past the window's end. Returns the lines' shape ids into the window's shapes (`line_kinds`), those
    shapes, the lines' bytes in `shapes` (newlines included) and whether such a run cut the window short.
    With `open_end` (`shapes` are a segment of the log's), a last run that reaches their end may be long."""
    import numpy as np

    end = shapes.rfind(b"\n", where, where + size)
    if end < 0:  # one line longer than the window
        end = shapes.find(b"\n", where)
    ids, starts, kinds = line_kinds(shapes, where, end)
    runs = np.concatenate(([0], np.flatnonzero(ids[1:] != ids[:-1]) + 1))
    long = np.flatnonzero(np.diff(np.append(runs, len(ids)))[1:] >= long_run) + 1
    cut = int(runs[long[0]]) if long.size else len(ids)
    if not long.size and runs.size > 1:
        last = int(runs[-1])
        unit = kinds[int(ids[last])] + b"\n"
        count = repeats(shapes, int(starts[last]), unit)
        if count >= long_run or (open_end and int(starts[last]) + count * len(unit) == len(shapes)):
            cut = last
    return ids[:cut], kinds, int(starts[cut]) - where, cut < len(ids)


def first_where(ids: Any, at: int, differs: Any) -> int:
    """The first index from `at` where `differs(ids[chunk])` holds, looking in doubling chunks (a cost
    that grows with the distance, not with the length of `ids`); len(ids) when none."""
    size = 64
    while at < len(ids):
        hits = differs(ids[at: at + size]).nonzero()[0]
        if hits.size:
            return at + int(hits[0])
        at += size
        size *= 2
    return len(ids)


def find_cycle(shapes: bytes, where: int, planned: Callable[[bytes], bool], min_lines: int,
               count_units: Callable[[bytes], int] | None = None) -> tuple[list[bytes], int] | None:
    """(the shapes of one cycle, how many cycles) when the lines from `where` repeat a cycle of 2 to
    MAX_PERIOD shapes, all `planned`, for at least `min_lines` lines (Composer: a header and its record
    lines), counted as `repeats` counts a run (or by `count_units(unit)`: over the log itself); else None."""
    head = shapes[where: where + (MAX_PERIOD + 1) * 256].split(b"\n", MAX_PERIOD + 1)[:MAX_PERIOD + 1]
    for period in range(2, min(MAX_PERIOD, len(head) - 1) + 1):
        if head[period] != head[0]:
            continue
        kinds = head[:period]
        if not all(map(planned, kinds)):
            return None
        unit = b"\n".join(kinds) + b"\n"
        count = repeats(shapes, where, unit) if count_units is None else count_units(unit)
        return (kinds, count) if count * period >= min_lines else None
    return None


_BAR = bytes.maketrans(b"=>", b"..")


def shape_of(text: bytes) -> bytes:
    """The shape of a line (or of many): its text without digits, signs and exponent letters, so that
    `1.5e-05` and `0.00012` (how Python prints an LR of either size) or `-0.5` and `0.5` are one shape,
    read as one run; and with `=` and `>` written as `.`, so that a progress bar's fill is not part of its
    shape (Keras' `[=====>....]` and `[>........]`, one shape at every width it has drawn). Words lose
    their e's alike on every line; lines this merges whose tokens still differ fail the token plan's
    check and are read one by one."""
    return text.translate(_BAR, b"0123456789eE+-")


def pieces(data: bytes, q: int, q_end: int, size: int) -> Iterator[tuple[int, int]]:
    """data[q:q_end] in pieces of about `size` bytes (memory the allocator reuses), cut at a line's end."""
    while q < min(q_end, len(data)):
        cut = min(q_end, len(data)) if q_end - q <= size else data.find(b"\n", q + size) + 1
        if cut <= q:
            return
        yield q, cut
        q = cut
