"""The points, stored once: sealed chunks of a series, and rows only for the tail not yet sealed.

`points_packed` holds each series in chunks of `MIN_CHUNK`..`MAX_CHUNK` points: values as little-endian
float64 (NaN for SQL's NULL), steps as `first + stride * i` when they run at a constant stride, else as
offsets from `first` in the narrowest signed width that holds them (1, 2 or 4 bytes; 8: the steps
themselves), times as integer ms since the run's t0: `t_first + int(t_slope * i)` plus a residual in
the narrowest width (its smallest value means NULL; no blob: residuals all 0; `t_first` NULL: no time).
`points_tail` holds the rows no chunk holds: the newest points of a series until there are `MIN_CHUNK`
of them, and the points of a chunk that a rewrite (a resume, a rollback) opened again. A (series, step)
lives in exactly one of the two. So a 1M-point series costs ~10 bytes a point and reads back as a few
hundred blobs (no Python object per point).

The `points` and `metrics` views give the same rows as the `points` table of schema version 2 did: the
chunks unpacked by SQL through the small functions `register` puts on a connection (every reader and
writer here registers them; a plain `sqlite3` shell sees the chunks and the tail, not the views).
Stores of version 1/2 (a `points` table holding every point) are read as they are, and converted when
opened for writing (store/packer.py `migrate`).
"""

from __future__ import annotations

import sqlite3
import struct
import sys
import zlib
from typing import TYPE_CHECKING, Any, Callable

from stethoscope.errors import UsageError

if TYPE_CHECKING:
    import numpy as np

MIN_CHUNK = 256  # a series' tail is sealed once it holds this many points (fewer stay rows)
MAX_CHUNK = 4096
_FAR = -(2**62)  # "before any step"
_MAX_GAPS = 64  # a version-2 series cut in more uncovered ranges than this is read row by row

TABLE = """
CREATE TABLE IF NOT EXISTS points_packed (
    series_id  INTEGER NOT NULL,
    start_step INTEGER NOT NULL,
    end_step   INTEGER NOT NULL,
    n          INTEGER NOT NULL,
    first      INTEGER NOT NULL,
    stride     INTEGER NOT NULL,
    steps      BLOB,
    vals       BLOB NOT NULL,
    lo         REAL,
    lo_step    INTEGER,
    hi         REAL,
    hi_step    INTEGER,
    bad        INTEGER NOT NULL DEFAULT 0,
    t_first    INTEGER,
    t_slope    REAL,
    times      BLOB,
    crc        INTEGER,
    PRIMARY KEY (series_id, start_step)
) WITHOUT ROWID;
"""
# lo/hi: the chunk's smallest and largest finite value and their steps (NULL when none is finite); bad: how
# many values are NaN/Inf. A chart of a long series is drawn from these alone (`extremes`), no blob read.
# crc: CRC-32 of vals, steps and times: damage inside a blob's overflow pages passes SQLite's page checks.

TAIL = """
CREATE TABLE IF NOT EXISTS points_tail (
    series_id INTEGER NOT NULL,
    step      INTEGER NOT NULL,
    time_ms   INTEGER,
    value     REAL,
    PRIMARY KEY (series_id, step)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS chunk_index (i INTEGER PRIMARY KEY);
"""

# One row per point of every chunk (chunk_index counts 0..MAX_CHUNK-1), then the tail rows. The CASTs give the
# columns the affinities the table's columns had (a query comparing `step = '2'` still matches step 2).
_STEP = ("CAST(CASE WHEN c.steps IS NULL THEN c.first + c.stride * k.i "
         "WHEN length(c.steps) = 8 * c.n THEN st_int(substr(c.steps, 8 * k.i + 1, 8)) "
         "ELSE c.first + st_int(substr(c.steps, length(c.steps) / c.n * k.i + 1, length(c.steps) / c.n)) END AS INTEGER)")
_TIME_MS = ("CAST(c.t_first + CAST(c.t_slope * k.i AS INTEGER) "
            "+ st_int(substr(c.times, length(c.times) / c.n * k.i + 1, length(c.times) / c.n)) AS INTEGER)")
_VALUE = "CAST(st_f64(substr(c.vals, 8 * k.i + 1, 8)) AS REAL)"
_T0 = "(SELECT CAST(value AS REAL) FROM run WHERE key = 't0')"
POINTS_VIEW = f"""
CREATE VIEW IF NOT EXISTS points AS
    SELECT c.series_id AS series_id, {_STEP} AS step, {_TIME_MS} AS time_ms, {_VALUE} AS value
    FROM points_packed c JOIN chunk_index k ON k.i < c.n
    WHERE st_check(c.crc, c.vals, c.steps, c.times)
    UNION ALL
    SELECT series_id, step, time_ms, value FROM points_tail
"""
# metrics joins each part to `series` itself: a filter on the name then unpacks only that series' chunks
METRICS_VIEW = f"""
CREATE VIEW IF NOT EXISTS metrics AS
    SELECT {_STEP} AS step, s.name AS name, {_VALUE} AS value, {_T0} + {_TIME_MS} / 1000.0 AS time
    FROM points_packed c JOIN series s ON s.id = c.series_id JOIN chunk_index k ON k.i < c.n
    WHERE st_check(c.crc, c.vals, c.steps, c.times)
    UNION ALL
    SELECT p.step, s.name, p.value, {_T0} + p.time_ms / 1000.0 FROM points_tail p JOIN series s ON s.id = p.series_id
"""

_BIG_ENDIAN = sys.byteorder == "big"
_F64 = struct.Struct("<d").unpack
_WIDTHS = ((1, "<i1"), (2, "<i2"), (4, "<i4"), (8, "<i8"))


def _st_int(b: bytes | None) -> int | None:
    """An offset of width len(b); its smallest value is NULL; no blob is 0 (see the module docstring)."""
    if b is None:
        return 0
    x = int.from_bytes(b, "little", signed=True)
    return None if x == -(1 << (8 * len(b) - 1)) else x


def _st_f64(b: bytes) -> float | None:
    x = _F64(b)[0]
    return None if x != x else x  # SQLite keeps no NaN: NULL, as the rows have it


def crc(vals: bytes, steps: bytes | None, times: bytes | None) -> int:
    return zlib.crc32(times or b"", zlib.crc32(steps or b"", zlib.crc32(vals)))


class CorruptChunk(UsageError, ValueError):
    """A chunk whose blobs do not match their checksum: a damaged store file, an input error (exit status 2,
    one line), never "a bug in the reader"."""


def _st_check(expected: int | None, vals: bytes, steps: bytes | None, times: bytes | None) -> int:
    """1 when the chunk's blobs match its checksum (None: a chunk written before checksums); else raises, and
    the reader looks for the damaged file (store/query.py)."""
    if expected is not None and crc(vals, steps, times) != expected:
        raise CorruptChunk("chunk checksum mismatch")
    return 1


def register(conn: sqlite3.Connection) -> None:
    """Put the functions the `points`/`metrics` views unpack chunks with on `conn`."""
    conn.create_function("st_int", 1, _st_int, deterministic=True)
    conn.create_function("st_f64", 1, _st_f64, deterministic=True)
    conn.create_function("st_check", 4, _st_check, deterministic=True)


def damaged(query: Query, db: str) -> str | None:
    """The first chunk of `db` whose blobs fail their checksum, said in words; None when all match."""
    _, rows = query(f"SELECT series_id, start_step, end_step, crc, vals, steps, times FROM {db}.points_packed "
                    "WHERE crc IS NOT NULL", ())
    for sid, start, end, expected, vals, steps, times in rows:
        if crc(vals, steps, times) != expected:
            return f"a packed chunk fails its checksum (series {sid}, steps {start}..{end})"
    return None


SCHEMA = (TAIL + "WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < %d) "
          "INSERT OR IGNORE INTO chunk_index SELECT i FROM c;" % (MAX_CHUNK - 1) + POINTS_VIEW + ";" + METRICS_VIEW + ";")
"""The tail, the chunk index and the views of a version-3 store; the views are left alone in an older store
(its `points` table and `metrics` view stand until store/packer.py `migrate` replaces them)."""


# -- encoding (the writer's side) ---------------------------------------------------------------

def _offsets(x: np.ndarray, nulls: np.ndarray | None = None) -> bytes | None:
    """`x` (int64) in the narrowest signed width; `nulls` marks entries stored as the width's smallest value."""
    import numpy as np

    if nulls is not None:
        x = np.where(nulls, 0, x)
    lo, hi = (int(x.min()), int(x.max())) if len(x) else (0, 0)
    if nulls is None and lo == 0 and hi == 0:
        return None
    for width, dtype in _WIDTHS:
        top = 1 << (8 * width - 1)
        if -top < lo and hi < top:
            out = x.astype(dtype)
            if nulls is not None:
                out[nulls] = -top
            return out.tobytes()
    raise OverflowError("offset beyond int64")


def encode(sid: int, steps: np.ndarray, times: np.ndarray, vals: np.ndarray) -> tuple[Any, ...]:
    """One `points_packed` row from a series' points in step order: int64 steps, times in ms as float64
    (NaN: none), float64 values (NaN for NULL)."""
    import numpy as np

    n, first = len(steps), int(steps[0])
    stride = int(steps[1] - steps[0]) if n > 1 else 1
    regular = n == 1 or bool(np.all(np.diff(steps) == stride))
    if regular:
        step_blob = None
    else:
        off = steps - first
        step_blob = _offsets(off)
        if step_blob is None or len(step_blob) == 8 * n:
            step_blob = steps.astype("<i8").tobytes()  # width 8: the steps themselves
    nulls = np.isnan(times)
    t_first = t_slope = t_blob = None
    if not nulls.all():
        t = np.where(nulls, 0.0, times).astype(np.int64)
        t_first = int(t[~nulls][0])
        t_last = int(t[~nulls][-1])
        t_slope = (t_last - t_first) / (n - 1) if n > 1 and not nulls[-1] and not nulls[0] else 0.0
        base = t_first + (t_slope * np.arange(n, dtype=np.float64)).astype(np.int64)
        t_blob = _offsets(t - base, nulls if nulls.any() else None)
    v = np.ascontiguousarray(vals, dtype="<f8")
    vals_blob = v.tobytes()
    return (sid, int(steps[0]), int(steps[-1]), n, first, stride, step_blob, vals_blob, *_extremes_of(steps, v),
            t_first, t_slope, t_blob, crc(vals_blob, step_blob, t_blob))


def _extremes_of(steps: np.ndarray, y: np.ndarray) -> tuple[Any, ...]:
    """(lo, lo_step, hi, hi_step, bad) of one chunk."""
    import numpy as np

    ok = np.isfinite(y)
    bad = len(y) - int(np.count_nonzero(ok))
    if bad == len(y):
        return None, None, None, None, bad
    i = int(np.argmin(y if not bad else np.where(ok, y, np.inf)))
    j = int(np.argmax(y if not bad else np.where(ok, y, -np.inf)))
    return float(y[i]), int(steps[i]), float(y[j]), int(steps[j]), bad


def decode(n: int, first: int, stride: int, steps: bytes | None, vals: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Steps (int64) and values (float64) of one chunk."""
    import numpy as np

    if steps is None:
        x = first + stride * np.arange(n, dtype=np.int64)
    elif len(steps) == 8 * n:
        x = np.frombuffer(steps, dtype="<i8")
    else:
        x = first + np.frombuffer(steps, dtype=f"<i{len(steps) // n}").astype(np.int64)
    return x, np.frombuffer(vals, dtype="<f8")


def decode_times(n: int, t_first: int | None, t_slope: float | None, times: bytes | None) -> np.ndarray:
    """Times of one chunk in ms since t0 as float64 (NaN: none)."""
    import numpy as np

    if t_first is None:
        return np.full(n, np.nan)
    t = (t_first + ((t_slope or 0.0) * np.arange(n, dtype=np.float64)).astype(np.int64)).astype(np.float64)
    if times is not None:
        w = len(times) // n
        r = np.frombuffer(times, dtype=f"<i{w}")
        t += r
        t[r == -(1 << (8 * w - 1))] = np.nan
    return t


# -- the reading side ---------------------------------------------------------------------------

Query = Callable[[str, tuple[Any, ...]], tuple[list[str], list[tuple[Any, ...]]]]


def _is_v3(query: Query, db: str) -> bool:
    return bool(query(f"SELECT 1 FROM {db}.sqlite_master WHERE name = 'points_tail'", ())[1])


def read_series(query: Query, db: str, sid: int, window: tuple[int, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Steps (int64) and values (float64, NaN for NaN) of series `sid` in attached database `db`, in step
    order: the packed chunks and the rows beside them. `window` (lo, hi): only the chunks and rows that
    hold steps lo..hi (a little more: whole chunks)."""
    import numpy as np

    lo_w, hi_w = window if window is not None else (_FAR, 2**62)
    v3 = _is_v3(query, db)
    checked = ", crc, times" if v3 else ", NULL, NULL"
    _, chunks = query(f"SELECT start_step, end_step, n, first, stride, steps, vals{checked} FROM {db}.points_packed "
                      "WHERE series_id = ? AND end_step >= ? AND start_step <= ? ORDER BY start_step",
                      (sid, lo_w, hi_w))
    for c in chunks:
        try:
            _st_check(c[7], c[6], c[5], c[8])
        except CorruptChunk:
            raise CorruptChunk(f"a packed chunk fails its checksum (series {sid}, steps {c[0]}..{c[1]}): the "
                               "store file is damaged") from None
    pieces = [(c[0], *decode(*c[2:7])) for c in chunks]
    if v3:  # the rows are the tail and reopened chunks: none holds a chunk's step
        x, y = _rows(query, db, sid, [(lo_w, hi_w)], "points_tail")
        if len(x):
            pieces.append((int(x[0]), x, y))
    else:  # version 2: the chunks copy the rows; rows only where no chunk covers
        gaps = [(max(a, lo_w), min(b, hi_w)) for a, b in _uncovered([(c[0], c[1]) for c in chunks])]
        gaps = [(a, b) for a, b in gaps if a <= b]
        if len(gaps) > _MAX_GAPS:
            return _rows(query, db, sid, [(lo_w, hi_w)])
        pieces += [(lo, *_rows(query, db, sid, [(lo, hi)])) for lo, hi in gaps]
    if not pieces:
        return np.empty(0, np.int64), np.empty(0, np.float64)
    pieces.sort(key=lambda p: p[0])
    x = np.concatenate([p[1] for p in pieces]).astype(np.int64, copy=False)
    y = np.concatenate([p[2] for p in pieces]).astype(np.float64, copy=False)
    if len(pieces) > 1 and not bool(np.all(x[1:] > x[:-1])):  # tail rows between chunks (a reopened chunk)
        order = np.argsort(x, kind="stable")
        x, y = x[order], y[order]
    return x, y


def extremes(query: Query, db: str, sid: int, max_rows: int = 4 * MAX_CHUNK) -> dict[str, Any] | None:
    """What a chart of series `sid` needs, without reading its points: each chunk's min and max at their
    steps, the rows no chunk holds as they are, every NaN/Inf step; `n` the number of points, `last` the
    newest step (None when empty), `chunks` how many. Min/max per bucket over these is min/max per bucket
    over the whole series. None when more than `max_rows` rows lie outside the chunks: then read the series."""
    import numpy as np

    _, chunks = query(f"SELECT start_step, end_step, n, lo, lo_step, hi, hi_step, bad FROM {db}.points_packed "
                      "WHERE series_id = ? ORDER BY start_step", (sid,))
    if _is_v3(query, db):
        table, gaps = "points_tail", [(_FAR, 2**62)]
    else:
        table, gaps = "points", _uncovered([(c[0], c[1]) for c in chunks])
        if len(gaps) > _MAX_GAPS:
            return None
    loose = sum(query(f"SELECT COUNT(*) FROM {db}.{table} WHERE series_id = ? AND step BETWEEN ? AND ?",
                      (sid, a, b))[1][0][0] for a, b in gaps)
    if loose > max_rows:
        return None
    loose_x, loose_y = _rows(query, db, sid, gaps, table)
    xs = [loose_x] + [np.array([c[4], c[6]], np.int64) for c in chunks if c[3] is not None]
    ys = [loose_y] + [np.array([c[3], c[5]], np.float64) for c in chunks if c[3] is not None]
    x, y = np.concatenate(xs), np.concatenate(ys)
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    keep = np.isfinite(y)
    bad = [loose_x[~np.isfinite(loose_y)]]
    for start, _, _, _, _, _, _, n_bad in chunks:
        if n_bad:  # rare: read that chunk for the steps of its NaN/Inf values
            _, rows = query(f"SELECT n, first, stride, steps, vals FROM {db}.points_packed "
                            "WHERE series_id = ? AND start_step = ?", (sid, start))
            cx, cy = decode(*rows[0])
            bad.append(cx[~np.isfinite(cy)])
    nonfinite = np.unique(np.concatenate(bad))
    ends = [int(loose_x.max())] if len(loose_x) else []
    return {"steps": x[keep], "values": y[keep], "nonfinite": nonfinite,
            "n": int(len(loose_x) + sum(c[2] for c in chunks)),
            "last": max(ends + [c[1] for c in chunks[-1:]], default=None), "chunks": len(chunks)}


def newest_times(query: Query, db: str, sid: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Steps and times (ms since t0) of the newest `n` points of `sid` that have a time, newest first, from a
    version-3 store: the tail rows and the chunks from the end until `n` are found."""
    import numpy as np

    _, rows = query(f"SELECT step, time_ms FROM {db}.points_tail WHERE series_id = ? AND time_ms IS NOT NULL", (sid,))
    xs, ts = [np.array([r[0] for r in rows], np.int64)], [np.array([r[1] for r in rows], np.float64)]
    found, below = len(rows), 2**62
    while found < n:
        _, chunks = query(f"SELECT start_step, n, first, stride, steps, vals, t_first, t_slope, times "
                          f"FROM {db}.points_packed WHERE series_id = ? AND start_step < ? "
                          "ORDER BY start_step DESC LIMIT 1", (sid, below))
        if not chunks:
            break
        below, k, first, stride, steps, vals, t_first, t_slope, times = chunks[0]
        x, t = decode(k, first, stride, steps, vals)[0], decode_times(k, t_first, t_slope, times)
        keep = ~np.isnan(t)
        xs.append(x[keep])
        ts.append(t[keep])
        found += int(keep.sum())
    x, t = np.concatenate(xs), np.concatenate(ts)
    order = np.argsort(-x, kind="stable")[:n]
    return x[order], t[order]


def newest(query: Query, db: str, times: bool = True) -> tuple[int | None, int | None] | None:
    """(the largest step, the largest time in ms since t0 of each series' newest chunk and the tail rows) over
    every series of a version-3 store in `db`, from the chunks' ends (no value read); None for an older
    store. The time is the run's last time unless a clock went back within the newest chunk."""
    import numpy as np

    if not _is_v3(query, db):
        return None
    _, rows = query(f"SELECT MAX(end_step) FROM {db}.points_packed UNION ALL SELECT MAX(step) FROM {db}.points_tail", ())
    step = max((r[0] for r in rows if r[0] is not None), default=None)
    if not times:
        return step, None
    _, rows = query(f"SELECT MAX(time_ms) FROM {db}.points_tail", ())
    found = [rows[0][0]] if rows[0][0] is not None else []
    _, chunks = query(f"SELECT n, t_first, t_slope, times FROM {db}.points_packed c WHERE t_first IS NOT NULL AND "
                      f"start_step = (SELECT MAX(start_step) FROM {db}.points_packed WHERE series_id = c.series_id)", ())
    for chunk in chunks:
        t = decode_times(*chunk)
        if not np.isnan(t).all():
            found.append(int(np.nanmax(t)))
    return step, max(found, default=None)


def _uncovered(covered: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The step ranges (inclusive) outside the sorted, disjoint `covered` ranges."""
    gaps, lo = [], _FAR
    for start, end in covered:
        if start > lo:
            gaps.append((lo, start - 1))
        lo = end + 1
    gaps.append((lo, 2**62))
    return gaps


def _rows(query: Query, db: str, sid: int, ranges: list[tuple[int, int]],
          table: str = "points") -> tuple[np.ndarray, np.ndarray]:
    import numpy as np

    steps: list[int] = []
    values: list[Any] = []
    for lo, hi in ranges:
        _, rows = query(f"SELECT step, value FROM {db}.{table} WHERE series_id = ? AND step BETWEEN ? AND ? "
                        "ORDER BY step", (sid, lo, hi))
        steps += [r[0] for r in rows]
        values += [r[1] for r in rows]
    return np.array(steps, dtype=np.int64), np.array(values, dtype=np.float64)
