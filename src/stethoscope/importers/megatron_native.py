"""The Megatron importer's native path: record lines found and read by the line scanner (`logtext/linescan.py`).

Once the general parser has read a record line (and learnt its regex template, `megatron_fast.py`), the
line's shape hash and the places of its numbers make a `Shape`: which number is the step, which are the
values (with their scales), which must hold a fixed value for a line to be read the same way (the global
batch size, zero skipped/nan counts), which must not be zero (the grad norm: a zero one may be a
pipeline-parallel artefact), the six numbers of a `[YYYY-MM-DD HH:MM:SS]` stamp, and the lines that may
sit between records and carry nothing (empty, a bare `time (ms)`, with or without the record's rank
prefix). A block's lines of that shape that pass those checks are read with numpy, the rest by the general
parser, in log order.
tests/importers/test_megatron.py reads every case this way, by the regex path and line by line, and
compares.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from stethoscope.importers.megatron_fast import STAMPED
from stethoscope.importers.megatron_fields import COUNTER_KEYS, GLOBAL_BATCH_KEY, field_name, number
from stethoscope.logtext.table import Layout

if TYPE_CHECKING:
    import numpy as np

    from stethoscope.logtext.coded import RowBlock
    from stethoscope.logtext.linescan import Scan

_ITERATION = re.compile(r"iteration\s+(\d+)\s*/\s*(\d+)")
_STAMP = re.compile(r"\[(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d(?:\.\d{1,6})?)\]")
_MAX_STEP = 2.0**53  # steps above it would not stay exact as doubles


class Shape(NamedTuple):
    hash: int
    count: int
    layout: Layout
    step: int  # which number of the line
    values: tuple[int, ...]
    fixed: tuple[tuple[int, float], ...]
    nonzero: tuple[int, ...]
    stamp: tuple[int, ...]  # year, month, day, hour, minute, seconds; () for none
    blanks: tuple[int, ...]  # shape hashes of the lines among records that carry nothing

    def fits(self, scan: Scan) -> np.ndarray:
        """Per line of the block: a record of this shape that reads as the general parser would read it."""
        import numpy as np

        fit = (scan.hashes == self.hash) & (scan.counts == self.count)
        rows = np.flatnonzero(fit)
        if rows.size:
            number = _numbers(scan, rows, self.count)
            ok = number(self.step) < _MAX_STEP
            for slot, want in self.fixed:
                ok &= number(slot) == want
            for slot in self.nonzero:
                ok &= number(slot) != 0.0
            if self.stamp:
                month, day, hour, minute = (number(slot) for slot in self.stamp[1:5])
                ok &= (month >= 1) & (month <= 12) & (day >= 1) & (day <= 31) & (hour < 24) & (minute < 60)
            fit[rows[~ok]] = False
        return fit

    def block(self, scan: Scan, rows: np.ndarray) -> RowBlock:
        """The points of `rows` (lines that fit) as a RowBlock."""
        import numpy as np

        from stethoscope.logtext.coded import RowBlock

        number = _numbers(scan, rows, self.count)
        if self.layout.scales:
            columns = [number(slot) * scale for slot, scale in zip(self.values, self.layout.scales)]
        else:  # copies: a view would keep the whole block's numbers alive
            columns = [np.array(number(slot)) for slot in self.values]
        times = None
        if self.stamp:
            year, month, day, hour, minute = (number(slot).astype(np.int64) for slot in self.stamp[:5])
            minutes = (_days_from_civil(year, month, day) * 1440 + hour * 60 + minute) * 60
            times = minutes.astype(np.float64) + number(self.stamp[5]) - 0.0  # as stamp_seconds adds
        return RowBlock(self.layout.names, number(self.step).astype(np.int64), columns, times)


def _numbers(scan: Scan, rows: np.ndarray, count: int) -> Callable[[int], np.ndarray]:
    """The k-th numbers of `rows` (lines of `count` numbers each) by k: columns of a (rows x count) view of the
    scan's numbers where no line between them has one (a block of records, blank lines between: no gather),
    else gathered line by line."""
    base = scan.first[rows]
    start = int(base[0])
    if int(base[-1]) - start == (rows.size - 1) * count:  # each line `count` past the one before
        table = scan.values[start:start + rows.size * count].reshape(rows.size, count)
        return lambda k: table[:, k]
    values = scan.values
    return lambda k: values[base + k]


def _days_from_civil(year: np.ndarray, month: np.ndarray, day: np.ndarray) -> np.ndarray:
    """Days since 1970-01-01 of proleptic Gregorian dates (what calendar.timegm counts)."""
    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * ((month + 9) % 12) + 2) // 5 + day - 1
    return era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468


def learn(raw: bytes, body_at: int, body: str, fields: list[tuple[str, str]], names: tuple[str, ...]) -> Shape | None:
    """The shape of a record line `raw` whose record text (rank prefix removed) is `body`, starting at
    byte `body_at`, read by the general parser into `fields`; None when its numbers cannot be placed
    (non-ASCII text, a stamp with a comma, a value the scanner reads otherwise) or its values are not
    `names` (the regex template's layout)."""
    from stethoscope.logtext.linescan import scan, shape_hash

    if not raw.isascii():
        return None
    line = scan(raw.rstrip(b"\r\n"), offsets=True)
    if len(line) != 1:
        return None
    slot_at = {int(at): k for k, at in enumerate(line.number_starts)}
    values = line.values
    placed: dict[str, list] = {"values": [], "names": [], "scales": [], "fixed": [], "nonzero": []}
    step: int | None = None
    stamp: tuple[int, ...] = ()
    at = body_at
    segments = body.split("|")
    kept = iter(fields)
    for segment in segments:
        it = _ITERATION.search(segment)
        if it and step is None:
            stamped = next(kept)[1] == STAMPED
            step = slot_at.get(at + it.start(1))
            m = _STAMP.search(segment)
            if bool(m) != stamped:  # a stamp read otherwise (`,123` seconds): the regex path times it
                return None
            if m:
                stamp = tuple(slot_at.get(at + m.start(g), -1) for g in range(1, 7))
                if -1 in stamp:
                    return None
        else:
            key, sep, text = segment.rpartition(":")
            if sep and key.strip():
                field_key, field_text = next(kept)
                start = at + len(key) + 1 + (len(text) - len(text.lstrip()))
                if not _place(field_key.lower(), field_text, slot_at.get(start), values, placed):
                    return None
        at += len(segment) + 1
    if step is None or tuple(placed["names"]) != names:
        return None
    scales = tuple(placed["scales"])
    layout = Layout(names, scales if any(s != 1.0 for s in scales) else None)
    prefix = raw[:body_at]  # a launcher's rank prefix (`[default7]:`) the lines around the records share
    blanks = tuple({shape_hash(before + text) for before in (prefix, b"") for text in (b"", b"time (ms)")})
    return Shape(int(line.hashes[0]), int(line.counts[0]), layout, step, tuple(placed["values"]),
                 tuple(placed["fixed"]), tuple(placed["nonzero"]), stamp, blanks)


def _place(key: str, text: str, slot: int | None, values: np.ndarray, placed: dict[str, list]) -> bool:
    """Note what the field's number means; False when it cannot be read back from the scan."""
    parsed = number(text)
    if key == GLOBAL_BATCH_KEY or key in COUNTER_KEYS:
        if parsed is None or slot is None or values[slot] != parsed[0]:
            return False
        placed["fixed"].append((slot, 0.0 if key in COUNTER_KEYS else parsed[0]))
        return True
    name, scale = field_name(key, parsed[1]) if parsed else (None, 1.0)
    if name is None or parsed is None:
        return True  # a field the general parser leaves out: only its text shape matters
    if slot is None or values[slot] != parsed[0]:
        return False
    placed["values"].append(slot)
    placed["names"].append(name)
    placed["scales"].append(scale)
    if key == "grad norm":
        placed["nonzero"].append(slot)
    return True


def mapped_blocks(log: mmap.mmap, size: int) -> Iterator[memoryview]:
    """A mapped log (`linescan.mapped`) in views of about `size` bytes that end at a line end (the last may
    not), as `linescan.blocks` reads a stream: no copy of the file into memory, nothing zero-filled first."""
    whole = memoryview(log)
    start, end = 0, len(log)
    while start < end:
        stop = min(start + size, end)
        if stop < end:
            cut = log.rfind(b"\n", start, stop) + 1
            stop = cut if cut > start else (log.find(b"\n", stop) + 1 or end)  # a line longer than a block
        yield whole[start:stop]
        start = stop


def close_map(log: mmap.mmap) -> None:
    """Unmap a log read by `mapped_blocks`; where a view of it is still held, the map goes with the last one."""
    try:
        log.close()
    except BufferError:
        pass


def read_scanned(reader: Any, chunk: bytearray | memoryview, scan: Scan, line: int) -> None:
    """A block read by the line scanner for `reader` (megatron._Reader): runs of lines that fit the current
    shape at once, the others by its general parser, in log order (a line it reads may teach a new shape).
    Where its regex template has no shape for the scanner, the rest of the block takes the regex path."""
    import numpy as np

    empty = scan.counts == 0
    blank = np.zeros(len(scan), bool)
    size, at = len(scan), 0
    shape: Shape | None = None
    misfits = np.zeros(0, np.int64)
    while at < size:
        current = reader.native if reader._template() is not None else None
        if current is None and reader._template() is not None:
            reader._lines(bytes(chunk[scan.starts[at]:]).removesuffix(b"\n").split(b"\n"), line + at)
            return
        end = at
        if current is not None:
            if current is not shape:
                blank = empty & np.isin(scan.hashes, np.array(current.blanks, np.uint64))
                shape, fit = current, current.fits(scan) | blank
                misfits = np.flatnonzero(~fit)
            k = int(np.searchsorted(misfits, at))
            end = int(misfits[k]) if k < misfits.size else size
        if end == at:
            stop = scan.starts[at + 1] - 1 if at + 1 < size else len(chunk)
            raw = bytes(chunk[scan.starts[at]:stop]).removesuffix(b"\n")
            reader.raw = (line + at + 1, raw)
            reader._slow(line + at + 1, raw.decode("utf-8", errors="replace").rstrip())
            at += 1
            continue
        rows = at + np.flatnonzero(~blank[at:end])
        if rows.size:
            block = current.block(scan, rows)
            reader._add_block(block)
            reader.last_step = int(block.steps[-1])
        at = end
