"""The write side of one rank's store. Used by exactly one thread (the record writer or an importer)."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stethoscope.errors import InputError
from stethoscope.records import Finding, json_safe, unit_of
from stethoscope.store.packed import SCHEMA as POINTS_SCHEMA
from stethoscope.store.packed import register
from stethoscope.store.packer import Packer, migrate
from stethoscope.store.schema import (
    PRAGMAS,
    RANK_FILE_FORMAT,
    RANK_FILE_GLOB,
    RUN_META_FILE,
    SCHEMA_VERSION,
    TABLES,
    VIEWS,
)

if TYPE_CHECKING:
    import numpy as np

# A point as the writer carries it: (name, step, value, unix time or None).
RawPoint = tuple[str, int, float, "float | None"]


def rank_path(run_dir: str | os.PathLike[str], rank: int) -> Path:
    return Path(run_dir) / RANK_FILE_FORMAT.format(rank=rank)


def holds_run(run_dir: str | os.PathLike[str]) -> bool:
    """True when `run_dir` already holds a run (a rank file or run.json)."""
    d = Path(run_dir)
    return d.is_dir() and ((d / RUN_META_FILE).exists() or any(d.glob(RANK_FILE_GLOB)))


def remove_run(run_dir: str | os.PathLike[str]) -> None:
    """Delete the run in `run_dir` (rank files with their WAL/SHM, run.json); other files stay."""
    d = Path(run_dir)
    for f in [*d.glob(RANK_FILE_GLOB + "*"), d / RUN_META_FILE]:
        f.unlink(missing_ok=True)


def fresh_run_dir(run_dir: str | os.PathLike[str], rank: int, resume: bool) -> Path:
    """Where this rank records: `run_dir`, unless its rank file holds an earlier run and `resume` is False;
    then the first of `run_dir-2`, `run_dir-3`, … free for this rank (two runs are never mixed in one store)."""
    d = Path(run_dir)
    if resume or not rank_path(d, rank).exists():
        return d
    n = 2
    while rank_path(d.with_name(f"{d.name}-{n}"), rank).exists():
        n += 1
    return d.with_name(f"{d.name}-{n}")


class RunStore:
    """One rank's SQLite file, open for writing. Not thread-safe: one writer thread owns it."""

    def __init__(self, path: str | os.PathLike[str], t0: float | None = None, pack: bool = True) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = connect_writable(self.path)
        # Every point once (store/packed.py): sealed chunks, rows for the tail. `pack=False` keeps every point
        # a row (benchmarks and tests of the row path); readers read both the same way.
        self._packer = Packer(self._conn, seal=pack)
        self._series: dict[str, int] = {}
        self._max_step: dict[int, int] = {}
        self.t0 = self._init_t0(t0)

    # -- setup ---------------------------------------------------------------------------------
    def _init_t0(self, t0: float | None) -> float:
        row = self._conn.execute("SELECT value FROM run WHERE key = 't0'").fetchone()
        if row is not None and row[0] is not None:
            return float(row[0])
        t0 = time.time() if t0 is None else t0
        with self._conn:
            self._conn.execute("INSERT OR REPLACE INTO run VALUES ('t0', ?)", (repr(t0),))
            self._conn.execute("INSERT OR REPLACE INTO run VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        return t0

    def series_id(self, name: str) -> int:
        sid = self._series.get(name)
        if sid is not None:
            return sid
        row = self._conn.execute("SELECT id FROM series WHERE name = ?", (name,)).fetchone()
        if row is None:
            cur = self._conn.execute("INSERT INTO series (name, unit) VALUES (?, ?)", (name, unit_of(name)))
            sid = int(cur.lastrowid)
        else:
            sid = int(row[0])
        top = self._packer.top(sid)
        self._max_step[sid] = -(2**62) if top is None else top
        self._series[name] = sid
        return sid

    # -- writes (each call is one transaction: readers never see half of it) --------------------
    def write_points(self, points: Iterable[RawPoint]) -> int:
        """Write a batch in one transaction; a re-recorded (series, step) archives the old value."""
        points = points if isinstance(points, list) else list(points)
        if not points:
            return 0
        return self.write_columns(*map(list, zip(*points)))

    def write_columns(self, names: list[str], steps: list[Any], values: list[Any], times: list[Any]) -> int:
        """`write_points` given as columns (what the record writer gathers: no tuple per point)."""
        if not names:
            return 0
        left_out: list[RawPoint] = []
        try:
            with self._conn:
                cols = self._columns(names, steps, values, times)
                if cols is None:
                    self._write_each(list(zip(names, _listed(steps), values, _listed(times))), left_out)
                else:
                    self._write_columns(*cols)
                self._packer.reseal()
        except BaseException:
            self._packer.forget()  # nothing held can be trusted after a rolled-back write
            self._series.clear()
            self._max_step.clear()
            raise
        if left_out:  # the rest of the batch is written; the caller counts this failure
            raise OverflowError(f"{len(left_out)} point(s) left out: step {left_out[0][1]} of {left_out[0][0]!r} is "
                                "not a 64-bit integer, which SQLite cannot store")
        return len(names)

    def _columns(self, names: list[str], steps: list[Any], values: list[Any], times: list[Any]) -> tuple[Any, ...] | None:
        """The batch as numpy columns (sid, step, time in ms as float with NaN, value with NaN), or None when a
        step is not an int or a value not a number (then it is written point by point)."""
        import numpy as np

        p = _period(names)
        for name in set(names[:p] if p else names).difference(self._series):
            self.series_id(name)
        if p:  # every step logs the same names in the same order: look up one period
            sids = np.tile(np.array(list(map(self._series.__getitem__, names[:p])), np.int64), len(names) // p)
        else:
            sids = list(map(self._series.__getitem__, names))
        step = steps if isinstance(steps, np.ndarray) else np.array(steps)
        if step.dtype != np.int64:
            return None
        try:
            value = np.array(values, dtype=np.float64)
            t = times if isinstance(times, np.ndarray) else np.array(times, dtype=np.float64)
        except (TypeError, ValueError, OverflowError):
            return None
        t_ms = np.trunc((t - self.t0) * 1000.0)
        return np.array(sids, dtype=np.int64), step, t_ms, value, (names, steps, values, times)

    def _write_columns(self, sid: np.ndarray, step: np.ndarray, t_ms: np.ndarray, value: np.ndarray,
                       cols: tuple[list[Any], ...]) -> None:
        import numpy as np

        again: list[int] = []
        for s, pos in _groups(sid):
            x = step[pos]
            top = np.maximum.accumulate(np.concatenate([[self._max_step[s]], x]))
            fresh = x > top[:-1]  # above every step the series had, in the store and earlier in the batch
            self._max_step[s] = int(top[-1])
            if fresh.all():
                self._packer.append(s, x, t_ms[pos], value[pos])
                continue
            self._packer.append(s, x[fresh], t_ms[pos][fresh], value[pos][fresh])
            again += np.arange(len(sid))[pos][~fresh].tolist()
        if again:  # written after the fresh points, in the batch's order (as rows were before)
            names, steps, values, times = cols
            steps, times = _listed(steps), _listed(times)  # Python numbers: SQLite binds no numpy scalar
            self._rewrite([(names[i], steps[i], values[i], times[i]) for i in sorted(again)])

    def _write_each(self, points: Sequence[RawPoint], left_out: list[RawPoint]) -> None:
        """A batch holding a step that is not an int or a value that is not a number: rows, point by point. A
        step past SQLite's 64-bit integers goes to `left_out`, not into the store: one such point failed the
        whole batch (every other metric of those steps lost)."""
        for p in points:
            if isinstance(p[1], int) and not -(2**63) <= p[1] < 2**63:
                left_out.append(p)
                continue
            sid = self.series_id(p[0])
            if isinstance(p[1], int) and p[1] > self._max_step[sid]:
                self._conn.execute("INSERT INTO points_tail VALUES (?, ?, ?, ?)", self._row(sid, p))
                self._packer.forget(sid)
                self._max_step[sid] = p[1]
            else:
                self._rewrite([p])

    def _row(self, sid: int, p: RawPoint) -> tuple[Any, ...]:
        return sid, p[1], None if p[3] is None else int((p[3] - self.t0) * 1000.0), p[2]

    def _rewrite(self, points: Sequence[RawPoint]) -> None:
        now_ms = int((time.time() - self.t0) * 1000.0)
        by_series: dict[int, list[RawPoint]] = {}
        for p in points:
            by_series.setdefault(self.series_id(p[0]), []).append(p)
        for sid, group in by_series.items():
            try:
                self._packer.reopen_steps(sid, [p[1] for p in group])  # the chunks holding them become rows
            except TypeError:
                self._packer.forget(sid)  # a step that compares with no int: no chunk holds it
            for p in group:
                self._conn.execute("INSERT INTO points_superseded SELECT series_id, step, time_ms, value, ? "
                                   "FROM points_tail WHERE series_id = ? AND step = ?", (now_ms, sid, p[1]))
                self._conn.execute("INSERT OR REPLACE INTO points_tail VALUES (?, ?, ?, ?)", self._row(sid, p))

    def supersede(self, from_step: int, to_step: int, rollback: int) -> None:
        """A rollback abandoned steps `from_step`..`to_step`: their points move to `points_superseded` (kept,
        never deleted) and the range is noted in `superseded`, so `points` holds the path that continued."""
        now = time.time()
        now_ms = int((now - self.t0) * 1000.0)
        try:
            with self._conn:
                sids = [r[0] for r in self._conn.execute("SELECT id FROM series")]
                for sid in sids:
                    self._packer.reopen(sid, from_step)  # chunks holding an abandoned step become rows
                    self._conn.execute("INSERT INTO points_superseded SELECT series_id, step, time_ms, value, ? "
                                       "FROM points_tail WHERE series_id = ? AND step >= ?", (now_ms, sid, from_step))
                    self._conn.execute("DELETE FROM points_tail WHERE series_id = ? AND step >= ?", (sid, from_step))
                last = self._conn.execute("SELECT MAX(id) FROM events").fetchone()[0]
                self._conn.execute("INSERT INTO superseded VALUES (?, ?, ?, ?, ?)",
                                   (from_step, to_step, rollback, now, last))
        finally:
            self._packer.forget()  # every series is read again at its next write
            self._series.clear()  # the newest step per series is read again
            self._max_step.clear()

    def write_events(self, events: Iterable[tuple[int | None, float | None, str, str, str, str, Any]]) -> None:
        """Each event: (step, time, kind, severity, source, message, data)."""
        events = list(events)
        rows = [(s, t, k, sev, src, msg, None if data is None else json.dumps(json_safe(data)))
                for s, t, k, sev, src, msg, data in events]
        with self._conn:
            self._conn.executemany(
                "INSERT INTO events (step, time, kind, severity, source, message, data) VALUES (?,?,?,?,?,?,?)", rows)
            saved = [(k, s, data) for s, _, k, _, _, _, data in events
                     if k in ("checkpoint", "rollback") and isinstance(data, dict)]
            if saved:
                self._checkpoint_rows(saved)

    def _checkpoint_rows(self, saved: list[tuple[str, Any, dict[str, Any]]]) -> None:
        """The `checkpoints` table from the saves the run recorded (it stayed empty while `ckpt list` showed
        them): status `saved` (the hashes are checked by `ckpt verify`, not here), `deleted` once retention
        removed it, `superseded` once a rollback set it aside."""
        for kind, step, data in saved:
            if kind == "rollback":
                for gone in data.get("superseded") or ():
                    self._conn.execute("UPDATE checkpoints SET status = 'superseded' WHERE step = ? AND "
                                       "status = 'saved'", (gone,))
                continue
            if data.get("path") is not None:
                metrics = data.get("metrics")
                self._conn.execute("INSERT INTO checkpoints VALUES (?, ?, ?, NULL, 'saved', ?)",
                                   (step, str(data["path"]), data.get("bytes"),
                                    None if metrics is None else json.dumps(json_safe(metrics))))
            for gone in data.get("deleted") or ():
                self._conn.execute("UPDATE checkpoints SET status = 'deleted' WHERE path = ?", (str(gone),))

    def write_findings(self, findings: Iterable[Finding], time_s: float | None = None) -> None:
        self.write_events(
            (f.step, time_s, f.type, f.severity, f.source, f.message, f.to_dict()) for f in findings)

    def write_batches(self, batches: Iterable[tuple[int, Sequence[Any]]]) -> None:
        rows = [(step, json.dumps(list(ids))) for step, ids in batches]
        with self._conn:
            self._conn.executemany("INSERT OR REPLACE INTO batches VALUES (?, ?)", rows)

    def write_stacks(self, rows: Iterable[tuple[Any, ...]]) -> None:
        """Rows of `stacks`: (snapshot, time, thread, depth, function, file, line) — hang and probe dumps."""
        with self._conn:
            self._conn.executemany("INSERT INTO stacks VALUES (?, ?, ?, ?, ?, ?, ?)", list(rows))

    def write_trace(self, rows: Iterable[tuple[Any, ...]]) -> None:
        """Rows of `trace`: (step, module, stage, duration, memory) — sampled per-module timings."""
        with self._conn:
            self._conn.executemany("INSERT INTO trace VALUES (?, ?, ?, ?, ?)", list(rows))

    def set_meta(self, items: Mapping[str, Any]) -> None:
        rows = [(k, v if isinstance(v, str) else json.dumps(json_safe(v), default=str)) for k, v in items.items()]
        with self._conn:
            self._conn.executemany("INSERT OR REPLACE INTO run VALUES (?, ?)", rows)

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:  # fold the WAL into the main file so a finished run is one self-contained file
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.DatabaseError:
            pass  # a reader holds it: the WAL stays and is folded in by the next writer or reader
        conn.close()


def _period(names: list[str]) -> int:
    """p when `names` repeats its first p names (all distinct) throughout; 0 otherwise."""
    try:
        p = names.index(names[0], 1)
    except ValueError:
        p = len(names)
    head = names[:p]
    return p if len(names) % p == 0 and len(set(head)) == p and names == head * (len(names) // p) else 0


def _groups(sid: np.ndarray) -> list[tuple[int, Any]]:
    """(series id, where its points are in the batch) in batch order per series. A batch of steps that each
    log the same names in the same order (what `Monitor.log` sends) is periodic: strided slices, no sort."""
    import numpy as np

    n = len(sid)
    again = np.flatnonzero(sid == sid[0])
    p = int(again[1]) if len(again) > 1 else n
    if n % p == 0 and len(np.unique(sid[:p])) == p and bool((sid.reshape(-1, p) == sid[:p]).all()):
        return [(int(sid[j]), slice(j, None, p)) for j in range(p)]
    order = np.argsort(sid, kind="stable")
    cuts = np.flatnonzero(sid[order][1:] != sid[order][:-1]) + 1
    return [(int(sid[order[a]]), order[a:b]) for a, b in zip([0, *cuts.tolist()], [*cuts.tolist(), n])]


def _listed(column: Any) -> list[Any]:
    """A column as a list of Python values (NaN times as None)."""
    if isinstance(column, list):
        return column
    return [None if x != x else x for x in column.tolist()]


def connect_writable(path: Path) -> sqlite3.Connection:
    """Open (creating if needed) a rank file with the schema, views and WAL pragmas applied."""
    try:
        conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level="DEFERRED")
        for pragma in PRAGMAS:
            conn.execute(pragma)
        register(conn)
        # One transaction: a reader never finds the file with half a schema. The findings view is recreated:
        # a store written by an older version keeps its own otherwise.
        conn.executescript("BEGIN;" + TABLES + POINTS_SCHEMA + "DROP VIEW IF EXISTS findings;" + VIEWS + "COMMIT;")
        migrate(conn)  # a store of version 1/2: its points stored once
    except sqlite3.DatabaseError as exc:
        raise InputError(path, f"not a stethoscope store ({exc})") from None
    return conn
