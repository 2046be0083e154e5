"""The write side of one rank's store. Used by exactly one thread (the record writer or an importer)."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from stethoscope.errors import InputError
from stethoscope.records import Finding, json_safe, unit_of
from stethoscope.store.packed import Packer, migrate
from stethoscope.store.schema import (
    PRAGMAS,
    RANK_FILE_FORMAT,
    RANK_FILE_GLOB,
    RUN_META_FILE,
    SCHEMA_VERSION,
    TABLES,
    VIEWS,
)

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
        # Packed chunks beside the rows (store/packed.py): fast reads of long series. `pack=False` only
        # for benchmarks (the store is then read row by row, as before packing existed).
        self._packer = Packer(self._conn) if pack else None
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
        top = self._conn.execute("SELECT MAX(step) FROM points WHERE series_id = ?", (sid,)).fetchone()[0]
        self._max_step[sid] = -(2**62) if top is None else int(top)
        self._series[name] = sid
        return sid

    # -- writes (each call is one transaction: readers never see half of it) --------------------
    def write_points(self, points: Iterable[RawPoint]) -> int:
        """Write a batch in one transaction; a re-recorded (series, step) archives the old value."""
        fresh: list[tuple[int, int, int | None, float]] = []
        again: list[tuple[int, int, int | None, float]] = []
        t0 = self.t0
        max_step = self._max_step
        packer = self._packer
        pending = packer.pending if packer is not None else None
        stopped = False
        try:
            with self._conn:
                for name, step, value, t in points:
                    sid = self._series.get(name)
                    if sid is None:
                        sid = self.series_id(name)
                    row = (sid, step, None if t is None else int((t - t0) * 1000.0), value)
                    if step > max_step[sid]:
                        max_step[sid] = step
                        fresh.append(row)
                        if pending is not None:
                            try:
                                add = pending[sid]
                                add[0](step)
                                add[1](value)
                            except (KeyError, TypeError, ValueError, OverflowError):  # the slow path
                                if not _pend(pending, packer, sid, step, value):
                                    packer = pending = self._stop_packing()
                                    stopped = True
                    else:
                        again.append(row)
                self._conn.executemany("INSERT INTO points VALUES (?, ?, ?, ?)", fresh)
                if again:
                    self._rewrite(again)
                if packer is not None:
                    packer.seal()
        except BaseException:
            if packer is not None:
                packer.forget()
            elif stopped:
                self._drop_chunks()  # packing stopped in this write, whose DELETE was rolled back with it
            raise
        return len(fresh) + len(again)

    def _stop_packing(self) -> None:
        """Points the packer cannot hold: this writer keeps rows only and drops the chunks (inside the
        write's transaction), so no reader ever takes a chunk that misses a rewrite."""
        self._packer = None
        self._conn.execute("DELETE FROM points_packed")
        return None

    def _drop_chunks(self) -> None:
        try:
            with self._conn:
                self._conn.execute("DELETE FROM points_packed")
        except sqlite3.DatabaseError:
            pass  # the write itself failed and is raised; this store then has no writer that keeps chunks

    def _rewrite(self, rows: Sequence[tuple[int, int, int | None, float]]) -> None:
        now_ms = int((time.time() - self.t0) * 1000.0)
        for sid, step, t_ms, value in rows:
            self._conn.execute(
                "INSERT INTO points_superseded SELECT series_id, step, time_ms, value, ? "
                "FROM points WHERE series_id = ? AND step = ?", (now_ms, sid, step))
            self._conn.execute("INSERT OR REPLACE INTO points VALUES (?, ?, ?, ?)", (sid, step, t_ms, value))
            if self._packer is not None:
                self._packer.rewritten(sid, step)

    def supersede(self, from_step: int, to_step: int, rollback: int) -> None:
        """A rollback abandoned steps `from_step`..`to_step`: their points move to `points_superseded` (kept,
        never deleted) and the range is noted in `superseded`, so `points` holds the path that continued."""
        now = time.time()
        now_ms = int((now - self.t0) * 1000.0)
        with self._conn:
            sids = [r[0] for r in self._conn.execute("SELECT id FROM series")]
            for sid in sids:
                self._conn.execute("INSERT INTO points_superseded SELECT series_id, step, time_ms, value, ? FROM points "
                                   "WHERE series_id = ? AND step >= ?", (now_ms, sid, from_step))
                self._conn.execute("DELETE FROM points WHERE series_id = ? AND step >= ?", (sid, from_step))
            # packed chunks holding an abandoned step go (their earlier steps are read from the rows again)
            self._conn.execute("DELETE FROM points_packed WHERE end_step >= ?", (from_step,))
            last = self._conn.execute("SELECT MAX(id) FROM events").fetchone()[0]
            self._conn.execute("INSERT INTO superseded VALUES (?, ?, ?, ?, ?)", (from_step, to_step, rollback, now, last))
        if self._packer is not None:
            self._packer.forget()  # every series is primed again from the rows at its next write
        self._series.clear()  # the newest step per series is read again
        self._max_step.clear()

    def write_events(self, events: Iterable[tuple[int | None, float | None, str, str, str, str, Any]]) -> None:
        """Each event: (step, time, kind, severity, source, message, data)."""
        rows = [(s, t, k, sev, src, msg, None if data is None else json.dumps(json_safe(data)))
                for s, t, k, sev, src, msg, data in events]
        with self._conn:
            self._conn.executemany(
                "INSERT INTO events (step, time, kind, severity, source, message, data) VALUES (?,?,?,?,?,?,?)", rows)

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


def _pend(pending: dict[int, Any], packer: Packer, sid: int, step: Any, value: Any) -> bool:
    """Keep a fresh point for the packer when the fast path could not: the series is not primed yet
    (prime reads the rows before this one: it is not inserted yet), or the value is None (a NaN) or not a
    number. False when the step is not an int64: then nothing is packed any more."""
    steps, values = packer.arrays(sid)
    if len(steps) > len(values):
        steps.pop()  # the fast path appended the step, then failed on the value
    elif sid not in pending:
        steps, values = packer.prime(sid)
    try:
        steps.append(step)
    except (TypeError, ValueError, OverflowError):
        return False
    try:
        values.append(value)
    except (TypeError, ValueError, OverflowError):
        values.append(float("nan"))
    return True


def connect_writable(path: Path) -> sqlite3.Connection:
    """Open (creating if needed) a rank file with the schema, views and WAL pragmas applied."""
    try:
        conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level="DEFERRED")
        for pragma in PRAGMAS:
            conn.execute(pragma)
        # The findings view is recreated: a store written by an older version keeps its own otherwise.
        conn.executescript(TABLES + "DROP VIEW IF EXISTS findings;" + VIEWS)
        migrate(conn)
    except sqlite3.DatabaseError as exc:
        raise InputError(path, f"not a stethoscope store ({exc})") from None
    return conn
