"""The native line scanner (`_linescan.c`), and what a reader needs around it.

`scan` reads a block of log text once, in C and without the GIL, into each line's shape (a hash of its
text with the numbers taken out and blanks left out) and its numbers as doubles (the ones `float()` gives).
A reader that knows what one line of a shape means (which number is the step, which the loss…) then reads
every line of that shape with numpy, not line by line.

The scanner is built when the package is installed with a C compiler at hand (setup.py); without it, or
with `STETHOSCOPE_NATIVE=0` in the environment, `available()` is False and the readers take their
pure-Python paths, which give the same answers (tests/importers/test_linescan.py and the readers' tests
compare them).
"""

from __future__ import annotations

import mmap
import threading
import time
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, BinaryIO, NamedTuple, TypeVar

from stethoscope.logtext.dresses import dressed

if TYPE_CHECKING:
    import numpy as np

try:
    from stethoscope.logtext import _linescan
except ImportError:  # built without a C compiler
    _linescan = None

T = TypeVar("T")
R = TypeVar("R")
_END = object()
_AHEAD = 3  # blocks scanned ahead of the one being read
_WORKERS = 2  # the scan releases the GIL: on a machine with cores to spare, blocks are scanned side by side
HALVES_LINES = 1 << 15  # `columns` of this many lines (by their starts) reads two halves side by side
HALVES_BYTES = 1 << 22  # `shapes` of this many bytes: likewise (each costs a thread's start)


def available() -> bool:
    """Whether the native scanner was built and is not turned off (`STETHOSCOPE_NATIVE=0`)."""
    return _linescan is not None and os.environ.get("STETHOSCOPE_NATIVE", "1") != "0"


class Scan(NamedTuple):
    """One block's lines: `hashes` (uint64) and `counts` (numbers per line, int64), `starts` (byte
    offset of each line), `first` (index in `values` of each line's first number), `values` (float64,
    all the block's numbers in order) and `number_starts` (byte offset of each number; empty unless
    asked for)."""

    hashes: np.ndarray
    counts: np.ndarray
    starts: np.ndarray
    first: np.ndarray
    values: np.ndarray
    number_starts: np.ndarray

    def __len__(self) -> int:
        return int(self.hashes.size)


def scan(data: bytes | bytearray, offsets: bool = False) -> Scan:
    """The lines of `data` (a line ends at a newline; the text after the last one is a line when it is
    not empty). Only where `available()`."""
    import numpy as np

    assert _linescan is not None
    hashes, counts, starts, values, number_starts = _linescan.scan(data, offsets=offsets)
    count = np.frombuffer(counts, np.uint32).astype(np.int64)
    first = np.zeros(count.size, np.int64)
    np.cumsum(count[:-1], out=first[1:])
    return Scan(np.frombuffer(hashes, np.uint64), count, np.frombuffer(starts, np.int64), first,
                np.frombuffer(values, np.float64), np.frombuffer(number_starts, np.int64))


def columns(data: bytes, width: int, picks: list[int], kinds: str, commas: list[bool],
            starts: np.ndarray | None = None, per_row: int = 1) -> np.ndarray | None:
    """The tokens `picks` of each line of `data` (lines of one console-log shape, `width` tokens each; with
    `starts`, the lines that start there; with `per_row` k, rows of k lines, tokens counted across them)
    read by `kinds` (see _linescan.c), a (rows x picks) float64 array; None when a row does not read so."""
    import numpy as np

    assert _linescan is not None
    if starts is not None and per_row == 1 and len(starts) >= HALVES_LINES:  # the same rows, read by two threads
        half = len(starts) // 2
        got = _side_by_side(lambda part: columns(data, width, picks, kinds, commas, part), starts[:half],
                            starts[half:])
        return None if got[0] is None or got[1] is None else np.concatenate(got)
    at = None if starts is None else np.ascontiguousarray(starts, np.int64)  # (read in place: no copy)
    got = _linescan.columns(data, width, np.array(picks, np.int32).tobytes(), kinds.encode(), bytes(commas), at,
                            per_row)
    if got is None:
        return None
    lines, values = got
    return np.frombuffer(values, np.float64).reshape(lines, len(picks))


def line_starts(data: bytes, start: int, count: int) -> np.ndarray:
    """Where the lines from data[start] start: `start`, then past each of the next `count` newlines (fewer
    where the data ends first), int64."""
    import numpy as np

    assert _linescan is not None
    _, _, after = _linescan.lines_from(data, start, count, True)
    starts = np.empty(len(after) // 8 + 1, np.int64)
    starts[0] = start
    starts[1:] = np.frombuffer(after, np.int64)
    return starts


def skip_lines(data: bytes, start: int, count: int) -> tuple[int, int]:
    """(how many of `count` newlines follow data[start], the offset past the last of them)."""
    assert _linescan is not None
    found, end, _ = _linescan.lines_from(data, start, count, False)
    return found, end


def line_kinds(data: bytes, start: int, end: int) -> tuple[np.ndarray, np.ndarray, list[bytes]]:
    """The lines of data[start:end] (as `split(b"\\n")` gives them) numbered by their text in the order
    each first appears: (int32 id per line, int64 start of each line and `end + 1` after the last, the
    distinct lines)."""
    import numpy as np

    assert _linescan is not None
    ids, at, firsts = _linescan.line_kinds(data, start, end)
    starts = np.empty(len(at) // 8 + 1, np.int64)
    starts[:-1] = np.frombuffer(at, np.int64)
    starts[-1] = end + 1
    first = np.frombuffer(firsts, np.int64)
    return np.frombuffer(ids, np.int32), starts, [data[starts[i]: starts[i + 1] - 1] for i in first.tolist()]


MAP_FROM = 1 << 22  # a log this big is mapped (`mapped`), not copied into memory
MAP_QUIET_S = 60.0  # ...when nothing wrote to it for this long: a live log may be truncated under a map


_NOT_PLAIN = (b"\x1f\x8b", b"\xff\xfe", b"\xfe\xff")  # gzip, UTF-16 (`importers.source` decodes them)


def _not_plain(head: bytes) -> bool:
    """gzip, UTF-16, a UTF-8 byte-order mark, Docker's json-file wrapping, a JSON list (a Kaggle notebook's log) or
    a hole of NULs (a file truncated under its writer; `importers.source` reads them) or a dressed log (an asciinema
    cast, logfmt or fluent-bit records: `logtext.dresses`): never mapped raw."""
    return head[:2] in _NOT_PLAIN or head.startswith((b'{"log":', b"\xef\xbb\xbf", b'[{"', b"\x00")) or dressed(head)


def mapped(path: str) -> mmap.mmap | None:
    """The file at `path` mapped read-only, where the native scanner reads it (the readers' bytes calls
    on it: find, rfind, slices, the buffer): no copy of a big log, whose pages the scans fault in as they
    go (a copy costs a pass over memory, about 0.2 s a GB here). None for a small, gzipped or unmappable
    file, one written to in the last `MAP_QUIET_S` (a live log: logrotate's copytruncate shrinking it under
    the map would end the process with SIGBUS; a copy is safe), or without the scanner: read it as bytes."""
    if not available():
        return None
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            if st.st_size < MAP_FROM or time.time() - st.st_mtime < MAP_QUIET_S or _not_plain(f.read(4096)):
                return None
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None


def shapes(data: bytes, start: int, end: int) -> bytes:
    """The console shape text of data[start:end] (`console_runs.shape_of`), without slicing the data first;
    a big range in two halves side by side (a byte's shape does not depend on its neighbours)."""
    assert _linescan is not None
    if end - start < HALVES_BYTES:
        return _linescan.shapes(data, start, end)
    mid = (start + end) // 2
    first, second = _side_by_side(lambda part: _linescan.shapes(data, *part), (start, mid), (mid, end))
    return first + second


def _side_by_side(work: Callable[[T], R], first: T, second: T) -> tuple[R, R]:
    """(work(first), work(second)), the second done meanwhile on a thread of its own (work that releases
    the GIL: the scanner's calls); an exception of either is raised here."""
    done: list[tuple[R | None, BaseException | None]] = []

    def run() -> None:
        try:
            done.append((work(second), None))
        except BaseException as error:  # noqa: BLE001 - raised again in the caller's thread
            done.append((None, error))

    thread = threading.Thread(target=run, name="stethoscope-scan", daemon=True)
    thread.start()
    try:
        result = work(first)
    finally:
        thread.join()
    other, error = done[0]
    if error is not None:
        raise error
    return result, other  # type: ignore[return-value]


def repeats(data: bytes, start: int, unit: bytes) -> tuple[int, int]:
    """(how many times the lines from data[start] repeat the shapes `unit` (each ending in a newline), the
    offset past the last whole repeat): `console_runs.repeats` over the log itself, its shapes never made."""
    assert _linescan is not None
    return _linescan.repeats(data, start, unit)


def shape_hash(line: bytes) -> int:
    """The shape hash of one line of text."""
    return int(scan(line + b"\n").hashes[0])


def blocks(stream: BinaryIO, size: int) -> Iterator[bytearray]:
    """The stream in blocks of about `size` bytes that end at a line end (the last may not), each read
    straight into its own buffer (the scan of one may still be running while the next is read)."""
    carry = b""
    while True:
        block = bytearray(len(carry) + size)
        block[:len(carry)] = carry
        got = stream.readinto(memoryview(block)[len(carry):])
        if not got:
            if carry:
                yield bytearray(carry)
            return
        del block[len(carry) + got:]
        cut = block.rfind(b"\n") + 1
        if cut == 0:  # a line longer than the block: the rest of it comes along
            block += stream.readline()
            carry = b""
            yield block
            continue
        carry = bytes(block[cut:])
        del block[cut:]
        yield block


def scanned(blocks: Iterable[bytearray]) -> Iterator[tuple[bytearray, Scan]]:
    """Each block with its scan, the next blocks scanned meanwhile on worker threads."""
    return ahead(scan, blocks)


def ahead(work: Callable[[T], R], items: Iterable[T]) -> Iterator[tuple[T, R]]:
    """(item, work(item)) in the items' order, the work on the next items done meanwhile on worker
    threads (for work that releases the GIL: the scanner's calls). Work not yet taken when the caller
    stops is cancelled."""
    with ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="stethoscope-scan") as pool:
        pending: deque = deque()
        source = iter(items)
        try:
            for item in source:
                pending.append((item, pool.submit(work, item)))
                if len(pending) > _AHEAD:
                    break
            while pending:
                item, future = pending.popleft()
                following = next(source, _END)
                if following is not _END:
                    pending.append((following, pool.submit(work, following)))
                yield item, future.result()
        finally:
            for _, future in pending:
                future.cancel()
