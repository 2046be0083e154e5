"""Packed copies of the points, so a long series reads back as a few hundred blobs instead of a
million rows.

`points` stays the truth (one row per point, what SQL users and every other reader see). Beside it,
`points_packed` holds each series in sealed chunks of `CHUNK` points: steps and values as
little-endian int64/float64 blobs (steps left out when they run at a constant stride), written by
the store's one writer in the transaction that writes the points. A chunk covers every `points` row
of its series with `start_step <= step <= end_step`, exactly; a rewrite of a step inside a chunk (a
resume, a rollback) deletes the chunk in the same transaction, and readers read that range from
`points`. So a reader takes the chunks and reads rows only where no chunk covers (the unsealed tail,
rewritten ranges): no Python object per point. Reading one 1M-point row by row costs ~0.7 s in
Python's sqlite3 alone (an object per value); from the chunks, tens of milliseconds.
Cost: 8 bytes a point on disk (16 when the steps are irregular) and a copy into an array per point
written. Stores written before the table existed are packed when first opened for writing (`migrate`).
"""

from __future__ import annotations

import sqlite3
import sys
from array import array
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    import numpy as np

CHUNK = 1024
PACKED_VERSION = 2  # the store's schema_version from which every series is packed
_FAR = -(2**62)  # "before any step": the first chunk of a series covers everything up to its end
_MAX_GAPS = 64  # a series cut in more uncovered ranges than this is read row by row

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
    PRIMARY KEY (series_id, start_step)
) WITHOUT ROWID;
"""
# lo/hi: the chunk's smallest and largest finite value and their steps (NULL when none is finite); bad: how
# many values are NaN/Inf. A chart of a long series is drawn from these alone (`extremes`), no blob read.

_BIG_ENDIAN = sys.byteorder == "big"


def _bytes(a: array) -> bytes:
    if _BIG_ENDIAN:
        a = array(a.typecode, a)
        a.byteswap()
    return a.tobytes()


class Packer:
    """The writer's side: points not yet sealed, per series, and sealing full chunks.

    Invariant per series: its arrays hold exactly the `points` rows with step > `sealed` (the end of the
    last chunk this series sealed), in step order. Owned by the store's writer thread.
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        # sid -> (steps.append, values.append): the writer's hot loop calls these, nothing else.
        self.pending: dict[int, tuple[Callable[[Any], None], Callable[[Any], None]]] = {}
        self._arrays: dict[int, tuple[array, array]] = {}
        self._sealed: dict[int, int] = {}
        self._stale: set[int] = set()

    def arrays(self, sid: int) -> tuple[array, array]:
        """The unsealed steps and values of `sid` (empty when not primed)."""
        return self._arrays.get(sid, (array("q"), array("d")))

    def prime(self, sid: int) -> tuple[array, array]:
        """Load the unsealed rows of `sid` (once per series and writer)."""
        top = self._conn.execute("SELECT MAX(end_step) FROM points_packed WHERE series_id = ?", (sid,)).fetchone()[0]
        self._sealed[sid] = _FAR if top is None else int(top)
        steps, vals = array("q"), array("d")
        cur = self._conn.execute("SELECT step, value FROM points WHERE series_id = ? AND step > ? ORDER BY step",
                                 (sid, self._sealed[sid]))
        for step, value in cur:
            steps.append(step)
            vals.append(_float(value))
        self._arrays[sid] = (steps, vals)
        self.pending[sid] = (steps.append, vals.append)
        return steps, vals

    def rewritten(self, sid: int, step: int) -> None:
        """Step `step` of `sid` was written again: drop the chunk that holds it, or reload the pending rows."""
        if sid not in self._arrays:
            self.prime(sid)  # reads the sealed end (and the row just written, when it lies beyond)
        if step <= self._sealed[sid]:
            self._conn.execute("DELETE FROM points_packed WHERE series_id = ? AND start_step <= ? AND end_step >= ?",
                               (sid, step, step))
        else:
            self._stale.add(sid)

    def seal(self) -> None:
        """Reload what rewrites touched, then write every full chunk (inside the caller's transaction)."""
        for sid in self._stale:
            self.prime(sid)
        self._stale.clear()
        rows: list[tuple[Any, ...]] = []
        for sid, (steps, vals) in self._arrays.items():
            if len(steps) >= CHUNK:
                rows += self._chunks(sid, steps, vals)
        if rows:
            self._conn.executemany("INSERT OR REPLACE INTO points_packed VALUES "
                                   "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)

    def forget(self) -> None:
        """After a failed transaction: nothing held here can be trusted; series are primed again."""
        self.pending.clear()
        self._arrays.clear()
        self._sealed.clear()
        self._stale.clear()

    def _chunks(self, sid: int, steps: array, vals: array) -> list[tuple[Any, ...]]:
        full = len(steps) // CHUNK * CHUNK
        start = self._sealed[sid] + 1
        rows = []
        for off in range(0, full, CHUNK):
            s, v = steps[off:off + CHUNK], vals[off:off + CHUNK]
            first, stride = s[0], s[1] - s[0]
            # Steps only increase (fresh points, or rows read back in order): with stride 1, first and last
            # tell; any other stride is checked point by point.
            regular = (s[-1] - first == CHUNK - 1) if stride == 1 else \
                (stride > 0 and s == array("q", range(first, first + stride * CHUNK, stride)))
            packed_vals = _bytes(v)
            rows.append((sid, start, s[-1], CHUNK, first, stride, None if regular else _bytes(s), packed_vals,
                         *_extremes_of(s, packed_vals)))
            start = s[-1] + 1
        self._sealed[sid] = start - 1
        del steps[:full]
        del vals[:full]
        return rows


def _extremes_of(steps: array, vals: bytes) -> tuple[Any, ...]:
    """(lo, lo_step, hi, hi_step, bad) of one chunk."""
    import numpy as np  # lazy: loaded once by the writer thread, on its first sealed chunk

    y = np.frombuffer(vals, dtype="<f8")
    ok = np.isfinite(y)
    bad = len(y) - int(np.count_nonzero(ok))
    if bad == len(y):
        return None, None, None, None, bad
    i = int(np.argmin(y if not bad else np.where(ok, y, np.inf)))
    j = int(np.argmax(y if not bad else np.where(ok, y, -np.inf)))
    return float(y[i]), steps[i], float(y[j]), steps[j], bad


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):  # NULL (a NaN) or something that is not a number
        return float("nan")


def migrate(conn: sqlite3.Connection) -> None:
    """Pack every series of a store written before `points_packed` existed (its rows stay as they are)."""
    row = conn.execute("SELECT value FROM run WHERE key = 'schema_version'").fetchone()
    if row is None or _version(row[0]) >= PACKED_VERSION:
        return  # a new store (packed as it is written), or one already packed
    with conn:
        packer = Packer(conn)
        for (sid,) in conn.execute("SELECT id FROM series").fetchall():
            packer.prime(sid)
            packer.seal()
            packer.forget()  # one series' rows in memory at a time
        conn.execute("INSERT OR REPLACE INTO run VALUES ('schema_version', ?)", (str(PACKED_VERSION),))


def _version(text: Any) -> int:
    try:
        return int(text)
    except (TypeError, ValueError):
        return 0


# -- the reading side ---------------------------------------------------------------------------

Query = Callable[[str, tuple[Any, ...]], tuple[list[str], list[tuple[Any, ...]]]]


def read_series(query: Query, db: str, sid: int, window: tuple[int, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Steps (int64) and values (float64, NaN for NaN) of series `sid` in attached database `db`, in step
    order: the packed chunks, and rows from `points` where no chunk covers. `window` (lo, hi): only the
    chunks and rows that hold steps lo..hi (a little more: whole chunks)."""
    import numpy as np  # lazy: the writer side (in the training process) never needs it

    lo_w, hi_w = window if window is not None else (_FAR, 2**62)
    _, chunks = query(f"SELECT start_step, end_step, n, first, stride, steps, vals FROM {db}.points_packed "
                      "WHERE series_id = ? AND end_step >= ? AND start_step <= ? ORDER BY start_step",
                      (sid, lo_w, hi_w))
    gaps = [(max(a, lo_w), min(b, hi_w)) for a, b in _uncovered([(c[0], c[1]) for c in chunks])]
    gaps = [(a, b) for a, b in gaps if a <= b]
    if len(gaps) > _MAX_GAPS:
        return _rows(query, db, sid, [(lo_w, hi_w)])
    pieces = [(lo, *_rows(query, db, sid, [(lo, hi)])) for lo, hi in gaps]
    for start, _, n, first, stride, steps, vals in chunks:
        x = (np.frombuffer(steps, dtype="<i8") if steps is not None
             else first + stride * np.arange(n, dtype=np.int64))
        pieces.append((start, x, np.frombuffer(vals, dtype="<f8")))
    pieces.sort(key=lambda p: p[0])
    if not pieces:
        return np.empty(0, np.int64), np.empty(0, np.float64)
    return (np.concatenate([p[1] for p in pieces]).astype(np.int64, copy=False),
            np.concatenate([p[2] for p in pieces]).astype(np.float64, copy=False))


def extremes(query: Query, db: str, sid: int, max_rows: int = 4 * CHUNK) -> dict[str, Any] | None:
    """What a chart of series `sid` needs, without reading its points: each chunk's min and max at their
    steps, the rows no chunk covers as they are, every NaN/Inf step; `n` the number of points, `last` the
    newest step (None when empty), `chunks` how many. Min/max per
    bucket over these is min/max per bucket over the whole series. None when more than `max_rows` rows lie
    outside the chunks (a store packed only in part): then read the series."""
    import numpy as np

    _, chunks = query(f"SELECT start_step, end_step, n, lo, lo_step, hi, hi_step, bad FROM {db}.points_packed "
                      "WHERE series_id = ? ORDER BY start_step", (sid,))
    gaps = _uncovered([(c[0], c[1]) for c in chunks])
    if len(gaps) > _MAX_GAPS:
        return None
    loose = sum(query(f"SELECT COUNT(*) FROM {db}.points WHERE series_id = ? AND step BETWEEN ? AND ?",
                      (sid, a, b))[1][0][0] for a, b in gaps)
    if loose > max_rows:
        return None
    loose_x, loose_y = _rows(query, db, sid, gaps)
    xs = [loose_x] + [np.array([c[4], c[6]], np.int64) for c in chunks if c[3] is not None]
    ys = [loose_y] + [np.array([c[3], c[5]], np.float64) for c in chunks if c[3] is not None]
    x, y = np.concatenate(xs), np.concatenate(ys)
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    keep = np.isfinite(y)
    bad = [loose_x[~np.isfinite(loose_y)]]
    for start, _, _, _, _, _, _, n_bad in chunks:
        if n_bad:  # rare: read that chunk for the steps of its NaN/Inf values
            cx, cy = read_series(query, db, sid, (start, start))
            bad.append(cx[~np.isfinite(cy)])
    nonfinite = np.unique(np.concatenate(bad))
    ends = [int(loose_x[-1])] if len(loose_x) else []
    return {"steps": x[keep], "values": y[keep], "nonfinite": nonfinite,
            "n": int(len(loose_x) + sum(c[2] for c in chunks)), "last": max(ends + [c[1] for c in chunks[-1:]], default=None),
            "chunks": len(chunks)}


def _uncovered(covered: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The step ranges (inclusive) outside the sorted, disjoint `covered` ranges."""
    gaps, lo = [], _FAR
    for start, end in covered:
        if start > lo:
            gaps.append((lo, start - 1))
        lo = end + 1
    gaps.append((lo, 2**62))
    return gaps


def _rows(query: Query, db: str, sid: int, ranges: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    import numpy as np

    steps: list[int] = []
    values: list[Any] = []
    for lo, hi in ranges:
        _, rows = query(f"SELECT step, value FROM {db}.points WHERE series_id = ? AND step BETWEEN ? AND ? "
                        "ORDER BY step", (sid, lo, hi))
        steps += [r[0] for r in rows]
        values += [r[1] for r in rows]
    return np.array(steps, dtype=np.int64), np.array(values, dtype=np.float64)
