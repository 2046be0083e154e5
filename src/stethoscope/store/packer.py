"""The writer's side of the packed points (store/packed.py): each series' unsealed tail, sealing it into
chunks, opening a chunk again for a rewrite, and converting stores of schema version 1/2.

Invariant per series: `pending` holds exactly the `points_tail` rows with step > `sealed` (the end of the
series' last chunk), in step order, as numpy arrays. A write appends its fresh points: when the tail then
holds `MIN_CHUNK` points or more, all of it is sealed (the rows it had are deleted, the new points never
become rows); else the new points are inserted as rows. With the writer's batches of thousands of points
most points go straight into a chunk. Owned by the store's writer thread, inside the store's transactions.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

from stethoscope.store.packed import MAX_CHUNK, METRICS_VIEW, MIN_CHUNK, POINTS_VIEW, decode, decode_times, encode

if TYPE_CHECKING:
    import numpy as np

PACKED_VERSION = 3  # the store's schema_version from which points are stored once (tail rows + chunks)
_FAR = -(2**62)
_INSERT = "INSERT INTO points_packed VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"


class Packer:
    """Per series: the sealed end and the pending tail (steps, times in ms as float, values)."""

    def __init__(self, conn: sqlite3.Connection, seal: bool = True) -> None:
        self._conn = conn
        self._seal = seal  # False: every point stays a row (benchmarks and tests of the row path)
        self._sealed: dict[int, int] = {}
        self._pending: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._reopened: list[tuple[int, int, int]] = []  # (sid, start, end) of chunks a write turned into rows

    def top(self, sid: int) -> int | None:
        """The newest step of `sid` in the store (chunks and rows)."""
        a = self._conn.execute("SELECT MAX(end_step) FROM points_packed WHERE series_id = ?", (sid,)).fetchone()[0]
        b = self._conn.execute("SELECT MAX(step) FROM points_tail WHERE series_id = ?", (sid,)).fetchone()[0]
        return max((x for x in (a, b) if x is not None), default=None)

    def append(self, sid: int, steps: np.ndarray, times: np.ndarray, vals: np.ndarray) -> None:
        """Fresh points of `sid` (steps above every step it has), in step order."""
        import numpy as np

        if sid not in self._pending:
            self._prime(sid)
        ps, pt, pv = self._pending[sid]
        if not self._seal or len(ps) + len(steps) < MIN_CHUNK:
            self._conn.executemany("INSERT INTO points_tail VALUES (?, ?, ?, ?)", _rows(sid, steps, times, vals))
            self._pending[sid] = (np.concatenate([ps, steps]), np.concatenate([pt, times]),
                                  np.concatenate([pv, vals]))
            return
        if len(ps):
            self._conn.executemany("DELETE FROM points_tail WHERE series_id = ? AND step = ?",
                                   [(sid, s) for s in ps.tolist()])
            steps, times, vals = np.concatenate([ps, steps]), np.concatenate([pt, times]), np.concatenate([pv, vals])
        k = -(-len(steps) // MAX_CHUNK)
        bounds = [len(steps) * i // k for i in range(k + 1)]
        self._conn.executemany(_INSERT, [encode(sid, steps[a:b], times[a:b], vals[a:b])
                                         for a, b in zip(bounds, bounds[1:])])
        self._sealed[sid] = int(steps[-1])
        self._pending[sid] = _empty()

    def reopen(self, sid: int, lo: int, hi: int | None = None) -> None:
        """Turn the chunks of `sid` holding steps lo..hi (hi None: every later step) into tail rows, so a
        rewrite or a rollback works on rows; the series is read again at its next write."""
        args = (sid, lo) if hi is None else (sid, lo, hi)
        cond = "end_step >= ?" if hi is None else "end_step >= ? AND start_step <= ?"
        chunks = self._conn.execute("SELECT start_step, n, first, stride, steps, vals, t_first, t_slope, times "
                                    f"FROM points_packed WHERE series_id = ? AND {cond}", args).fetchall()
        for start, n, first, stride, steps, vals, t_first, t_slope, times in chunks:
            x, y = decode(n, first, stride, steps, vals)
            self._reopened.append((sid, start, int(x[-1])))
            self._conn.executemany("INSERT INTO points_tail VALUES (?, ?, ?, ?)",
                                   _rows(sid, x, decode_times(n, t_first, t_slope, times), y))
            self._conn.execute("DELETE FROM points_packed WHERE series_id = ? AND start_step = ?", (sid, start))
        self.forget(sid)

    def reopen_steps(self, sid: int, steps: list[Any]) -> None:
        """`reopen` the chunks of `sid` that hold any of `steps` (one look at the chunk ranges for them all)."""
        import bisect

        ranges = self._conn.execute("SELECT start_step, end_step FROM points_packed WHERE series_id = ? "
                                    "ORDER BY start_step", (sid,)).fetchall()
        starts = [r[0] for r in ranges]
        hit = set()
        for step in steps:
            i = bisect.bisect_right(starts, step) - 1
            if i >= 0 and step <= ranges[i][1]:
                hit.add(starts[i])
        for start in sorted(hit):
            self.reopen(sid, start, start)
        self.forget(sid)

    def reseal(self) -> None:
        """Pack again the chunks this write reopened (their rows, rewritten values included), so rows stay only
        for the tail; in the write's transaction. A range holding a step that is not an int stays rows."""
        import numpy as np

        reopened, self._reopened = self._reopened, []
        for sid, start, end in reopened:
            rows = self._conn.execute("SELECT step, time_ms, value FROM points_tail WHERE series_id = ? "
                                      "AND step BETWEEN ? AND ? ORDER BY step", (sid, start, end)).fetchall()
            steps = np.array([r[0] for r in rows])
            if not rows or steps.dtype != np.int64 or (end > self._end(sid) and len(rows) < MIN_CHUNK):
                continue  # nothing left (a rollback), not packable, or a short newest range: the tail
            try:
                times = np.array([r[1] for r in rows], np.float64)
                vals = np.array([r[2] for r in rows], np.float64)
            except (TypeError, ValueError):
                continue
            self._conn.execute("DELETE FROM points_tail WHERE series_id = ? AND step BETWEEN ? AND ?", (sid, start, end))
            k = -(-len(steps) // MAX_CHUNK)
            bounds = [len(steps) * i // k for i in range(k + 1)]
            self._conn.executemany(_INSERT, [encode(sid, steps[a:b], times[a:b], vals[a:b])
                                             for a, b in zip(bounds, bounds[1:])])
            self.forget(sid)

    def _end(self, sid: int) -> int:
        top = self._conn.execute("SELECT MAX(end_step) FROM points_packed WHERE series_id = ?", (sid,)).fetchone()[0]
        return _FAR if top is None else int(top)

    def forget(self, sid: int | None = None) -> None:
        """What is held for `sid` (None: every series) no longer matches the store: read it again when used."""
        if sid is None:
            self._pending.clear()
            self._sealed.clear()
            self._reopened.clear()
        else:
            self._pending.pop(sid, None)
            self._sealed.pop(sid, None)

    def _prime(self, sid: int) -> None:
        import numpy as np

        top = self._conn.execute("SELECT MAX(end_step) FROM points_packed WHERE series_id = ?", (sid,)).fetchone()[0]
        self._sealed[sid] = _FAR if top is None else int(top)
        rows = self._conn.execute("SELECT step, time_ms, value FROM points_tail WHERE series_id = ? AND step > ? "
                                  "ORDER BY step", (sid, self._sealed[sid])).fetchall()
        try:
            steps = np.array([r[0] for r in rows], np.int64 if not rows else None)
            if steps.dtype != np.int64:
                raise TypeError("a step that is not an int")
            self._pending[sid] = (steps, np.array([r[1] for r in rows], np.float64),
                                  np.array([r[2] for r in rows], np.float64))
        except (TypeError, ValueError, OverflowError):  # a row no chunk can hold: this series stays rows
            self._pending[sid] = _empty()
            self._sealed[sid] = 2**62


def _empty() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    import numpy as np

    return np.empty(0, np.int64), np.empty(0, np.float64), np.empty(0, np.float64)


def _rows(sid: int, steps: np.ndarray, times: np.ndarray, vals: np.ndarray) -> list[tuple[Any, ...]]:
    """Tail rows: NaN time or value as NULL (SQLite keeps no NaN)."""
    t = [None if x != x else int(x) for x in times.tolist()]
    return list(zip([sid] * len(steps), steps.tolist(), t, vals.tolist()))


def migrate(conn: sqlite3.Connection) -> None:
    """Store every point of a version 1/2 store once: the chunks are packed from its `points` rows (with their
    times), which are dropped, and `points` becomes the view. In one transaction."""
    kind = conn.execute("SELECT type FROM sqlite_master WHERE name = 'points'").fetchone()
    if kind is None or kind[0] != "table":
        return
    cols = {r[1] for r in conn.execute("PRAGMA table_info(points_packed)")}
    with conn:
        conn.execute("DELETE FROM points_packed")  # version 2's copies, without times: packed again below
        for name in ("t_first INTEGER", "t_slope REAL", "times BLOB", "crc INTEGER"):
            if name.split()[0] not in cols:
                conn.execute(f"ALTER TABLE points_packed ADD COLUMN {name}")
        conn.execute("INSERT INTO points_tail SELECT series_id, step, time_ms, value FROM points")
        conn.execute("DROP VIEW IF EXISTS metrics")
        conn.execute("DROP TABLE points")
        conn.execute(POINTS_VIEW)
        conn.execute(METRICS_VIEW)
        packer = Packer(conn)
        for (sid,) in conn.execute("SELECT id FROM series").fetchall():
            packer._prime(sid)
            steps, times, vals = packer._pending[sid]
            if len(steps) >= MIN_CHUNK:  # every row of the series is the tail of a series with no chunk
                conn.execute("DELETE FROM points_tail WHERE series_id = ?", (sid,))
                packer._pending[sid] = _empty()
                packer.append(sid, steps, times, vals)
            packer.forget()  # one series in memory at a time
        conn.execute("INSERT OR REPLACE INTO run VALUES ('schema_version', ?)", (str(PACKED_VERSION),))
