"""The read side: every rank file of a run behind one read-only connection.

SQLite has no NaN: a NaN value is stored as NULL (a point row exists only when a value was
recorded, so a NULL value always means NaN); `series()` gives it back as float('nan').
Views `metrics`, `findings`, `alerts`, `events`, … are presented with a `rank` column over all rank
files. User SQL runs under an authorizer that allows reading only: writes, ATTACH, pragmas and
schema changes are refused with `QueryRefused`.
Up to ten rank files (SQLite's ATTACH cap) are attached behind live temp views; a larger run is
copied into indexed tables of a private temporary database, a snapshot taken at open.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stethoscope.errors import NotARunError, QueryRefused
from stethoscope.store.packed import CorruptChunk, damaged, extremes, newest, read_series, register
from stethoscope.store.schema import FINDINGS_FROM_EVENTS, RANK_FILE_GLOB, RANKED

if TYPE_CHECKING:
    import numpy as np

_RANK_RE = re.compile(r"rank-(\d+)\.sqlite$")
# SQLite caps ATTACH at 10 databases unless compiled otherwise (setlimit cannot raise it).
MAX_ATTACHED = 10
# Indexes on the copied tables of a run with more ranks than that: the reads the CLI makes.
_INDEXES = {"metrics": "rank, name, step", "points": "rank, series_id, step", "events": "rank, kind, step",
            "series": "rank, id", "run": "rank, key"}

_NAN = float("nan")
_LATER = frozenset({"superseded"})  # tables added after stores were written without them
_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}


def rank_files(path: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """The (rank, file) pairs of a run directory, or of a single rank file given directly."""
    p = Path(path)
    if p.is_file():
        m = _RANK_RE.search(p.name)
        if m is None and p.suffix not in (".sqlite", ".db"):
            raise NotARunError(f"{p}: not a stethoscope run store (expected a run directory or a rank-*.sqlite file)")
        if m is None and _foreign_sqlite(p):  # another tool's database (MLflow's mlflow.db): the importers read it
            raise NotARunError(f"{p}: an SQLite file, but not a stethoscope store")
        return [(int(m.group(1)) if m else 0, p)]
    if not p.exists():
        raise NotARunError(f"{p}: no such file or directory")
    found = sorted((int(m.group(1)), f) for f in p.glob(RANK_FILE_GLOB) if (m := _RANK_RE.search(f.name)))
    if not found:
        raise NotARunError(f"{p}: not a stethoscope run (no {RANK_FILE_GLOB} files); "
                           "run `stethoscope runs` to list runs, or `stethoscope import` a foreign log")
    return found


def _foreign_sqlite(f: Path) -> bool:
    """A readable SQLite file without a store's tables. A file that cannot be read stays a (damaged) store,
    so that opening it says what is wrong."""
    try:
        conn = sqlite3.connect(f"{f.resolve().as_uri()}?mode=ro", uri=True)
        try:
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return False
    return bool(names) and not {"points", "series", "events", "run"} <= names


def is_run(path: str | os.PathLike[str]) -> bool:
    try:
        rank_files(path)
    except NotARunError:
        return False
    return True


@dataclass
class RunReader:
    """A read-only view over all rank files of one run.

    A rank file that cannot be read (not SQLite, or corrupt pages found by a query) is left out and
    named in `skipped` ("FILE: what is wrong"); the other ranks stay readable.
    """

    path: Path
    conn: sqlite3.Connection
    ranks: list[int]
    files: list[tuple[int, Path]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    aliases: dict[int, str] = field(default_factory=dict)  # rank -> its attached database (r0, r1, …)
    _has_packed: dict[str, bool] = field(default_factory=dict, repr=False)

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Run one read-only statement; returns (column names, rows)."""
        try:
            return self._query(sql, params)
        except sqlite3.DatabaseError as exc:
            if not _is_corrupt(exc) or not self._drop_corrupt():
                raise _refusal(sql, exc, self.path) from None
        try:  # again over the intact ranks
            return self._query(sql, params)
        except sqlite3.DatabaseError as exc:
            raise _refusal(sql, exc, self.path) from None

    def _query(self, sql: str, params: tuple[Any, ...]) -> tuple[list[str], list[tuple[Any, ...]]]:
        try:
            cur = self.conn.execute(sql, params)
            rows = cur.fetchall()
        except (sqlite3.ProgrammingError, sqlite3.Warning, ValueError, OverflowError) as exc:
            raise QueryRefused(f"query refused: {exc}") from None
        return [d[0] for d in cur.description or ()], rows

    def verify(self) -> list[str]:
        """Check every page of every rank file (SQLite's quick_check: reads the whole files), leave out the
        corrupt ones; returns `skipped`. Queries find corrupt pages on their own, but only in what they read."""
        self._drop_corrupt()
        return self.skipped

    def _drop_corrupt(self) -> bool:
        """Find the attached rank files with corrupt pages, rebuild the views without them; False when
        none was found (or every rank is bad: then the error names them all)."""
        if len(self.files) > MAX_ATTACHED or not self.files:
            return False
        self.conn.set_authorizer(None)
        self.conn.execute("PRAGMA query_only = OFF")
        try:
            # r{i} is the file's place among every rank file found, not among those kept (one left out when
            # opened shifts the others): `aliases` holds it.
            attached = [(int(self.aliases[rank][1:]), rank, f) for rank, f in self.files]
            bad = {i: problem for i, _, _ in attached if (problem := _check_pages(self.conn, i))}
            if not bad:
                return False
            for i, _, f in attached:
                if i in bad:
                    self.skipped.append(f"{f}: {bad[i]}")
            if len(bad) == len(self.files):
                raise NotARunError("; ".join(self.skipped[-len(bad):]))
            keep = [(i, rank) for i, rank, _ in attached if i not in bad]
            self.files = [(rank, f) for i, rank, f in attached if i not in bad]
            _create_views(self.conn, keep, replace=True)
            self.ranks = [rank for _, rank in keep]
            return True
        finally:
            self.conn.execute("PRAGMA query_only = ON")
            self.conn.set_authorizer(_authorize)

    def series(self, name: str, rank: int | None = None) -> tuple[list[int], list[float]]:
        """Steps and values of one metric (rank 0, or the lowest rank present, by default)."""
        rank = self.ranks[0] if rank is None else rank
        if self._db(rank) is not None:
            steps, values = self.series_arrays(name, rank)
            return steps.tolist(), values.tolist()
        rows = self._series_rows(name, rank)
        return [r[0] for r in rows], [_NAN if r[1] is None else r[1] for r in rows]

    def series_arrays(self, name: str, rank: int | None = None,
                      window: tuple[int, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """`series` as numpy arrays (int64 steps, float64 values with NaN), read from the packed chunks
        (store/packed.py) where the rank file has them: no Python object per point. `window` (lo, hi):
        at least the steps lo..hi (whole chunks around them when packed)."""
        import numpy as np

        rank = self.ranks[0] if rank is None else rank
        db = self._db(rank)
        if db is not None:
            _, ids = self.query(f"SELECT id FROM {db}.series WHERE name = ?", (name,))
            if not ids:
                return np.empty(0, np.int64), np.empty(0, np.float64)
            try:
                return read_series(self.query, db, ids[0][0], window)
            except CorruptChunk as exc:
                raise NotARunError(f"{dict(self.files).get(rank, self.path)}: a rank file is corrupt ({exc}, "
                                   f"series {name!r})") from None
        rows = self._series_rows(name, rank)
        return np.array([r[0] for r in rows], np.int64), np.array([r[1] for r in rows], np.float64)

    def series_extremes(self, name: str, rank: int | None = None) -> dict[str, Any] | None:
        """For a chart of a long series without reading it: each packed chunk's min and max at their steps,
        the points outside chunks, the NaN/Inf steps, `n` (store/packed.py `extremes`). None when the rank file
        has no chunks for most of it (a store written before them): read `series_arrays` then."""
        import numpy as np

        rank = self.ranks[0] if rank is None else rank
        db = self._db(rank)
        if db is None:
            return None
        _, ids = self.query(f"SELECT id FROM {db}.series WHERE name = ?", (name,))
        if not ids:
            empty = np.empty(0, np.int64)
            return {"steps": empty, "values": np.empty(0, np.float64), "nonfinite": empty, "n": 0, "last": None,
                    "chunks": 0}
        return extremes(self.query, db, ids[0][0])

    def _series_rows(self, name: str, rank: int) -> list[tuple[Any, ...]]:
        return self.query("SELECT step, value FROM metrics WHERE rank = ? AND name = ? ORDER BY step", (rank, name))[1]

    def _db(self, rank: int) -> str | None:
        """The attached database of `rank` when it holds packed chunks (else its series are read row by row)."""
        db = self.aliases.get(rank) if rank in self.ranks else None
        if db is not None and db not in self._has_packed:
            _, rows = self.query(f"SELECT 1 FROM {db}.sqlite_master WHERE name = 'points_packed'")
            self._has_packed[db] = bool(rows)
        return db if db is not None and self._has_packed[db] else None


    def last_step(self, rank: int | None = None) -> int | None:
        """The newest step of any series of `rank` (the lowest by default), without reading the points."""
        rank = self.ranks[0] if rank is None else rank
        got = self._newest(rank, times=False)
        if got is not None:
            return got[0]
        _, ids = self.query("SELECT id FROM series WHERE rank = ?", (rank,))
        tops = [self.query("SELECT MAX(step) FROM points WHERE rank = ? AND series_id = ?", (rank, sid))[1][0][0]
                for (sid,) in ids]  # a primary-key probe per series of an older store's table
        return max((t for t in tops if t is not None), default=None)

    def last_time(self, rank: int | None = None) -> float | None:
        """The time of the newest points of `rank` (unix seconds; None when no point has a time): `MAX(time)` of
        `metrics` unless a clock went back."""
        rank = self.ranks[0] if rank is None else rank
        got = self._newest(rank)
        if got is None:
            return self.query("SELECT MAX(time) FROM metrics WHERE rank = ?", (rank,))[1][0][0]
        if got[1] is None:
            return None
        _, t0 = self.query("SELECT CAST(value AS REAL) FROM run WHERE rank = ? AND key = 't0'", (rank,))
        return t0[0][0] + got[1] / 1000.0 if t0 and t0[0][0] is not None else None

    def _newest(self, rank: int, times: bool = True) -> tuple[int | None, int | None] | None:
        db = self._db(rank)
        return newest(self.query, db, times) if db is not None else None

    def superseded(self, rank: int | None = None) -> list[tuple[int, int, int, int | None]]:
        """The step ranges rollbacks abandoned: (from_step, to_step, rollback, last event id before it)."""
        rank = self.ranks[0] if rank is None else rank
        _, rows = self.query("SELECT from_step, to_step, rollback, last_event FROM superseded WHERE rank = ? "
                             "ORDER BY rollback", (rank,))
        return [tuple(r) for r in rows]  # type: ignore[misc]

    def meta(self, rank: int | None = None) -> dict[str, str]:
        rank = self.ranks[0] if rank is None else rank
        _, rows = self.query("SELECT key, value FROM run WHERE rank = ?", (rank,))
        return dict(rows)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> RunReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_run(path: str | os.PathLike[str]) -> RunReader:
    """Open every rank file of the run at `path` read-only. Raises NotARunError when no rank is readable;
    unreadable ranks are left out and named in `RunReader.skipped`."""
    files = rank_files(path)
    attach = len(files) <= MAX_ATTACHED
    # "" is a private on-disk temporary database, deleted on close: nothing is written to the run.
    conn = sqlite3.connect(":memory:" if attach else "", uri=True, check_same_thread=False)
    register(conn)  # the `points` view of a rank file unpacks its chunks with these
    skipped: list[str] = []
    try:
        with _reading(path):  # errors of one file already name it; this catches the rest
            kept = _attach_views(conn, files, skipped) if attach else _copy_tables(conn, files, skipped)
        if not kept:
            raise NotARunError("; ".join(skipped))
    except BaseException:
        conn.close()
        raise
    conn.execute("PRAGMA query_only = ON")
    conn.set_authorizer(_authorize)
    ranks = {rank for rank, _ in kept}
    aliases = {rank: f"r{i}" for i, (rank, f) in enumerate(files) if (rank, f) in kept} if attach else {}
    return RunReader(Path(path), conn, sorted(ranks), kept if attach else files, skipped, aliases)


@contextmanager
def _reading(what: str | os.PathLike[str]) -> Iterator[None]:
    try:
        yield
    except sqlite3.DatabaseError as exc:
        raise NotARunError(f"{what}: not a readable stethoscope store ({exc})") from None


# The last: a `points`/`metrics` view found a packed chunk failing its checksum (store/packed.py `st_check`).
_CORRUPT = ("malformed", "not a database", "disk i/o error", "database corrupt", "file is encrypted",
            "user-defined function raised exception")


def _is_corrupt(exc: sqlite3.DatabaseError) -> bool:
    return any(k in str(exc).lower() for k in _CORRUPT)


def _check_pages(conn: sqlite3.Connection, i: int) -> str | None:
    """What is wrong with attached file r{i} (SQLite's quick_check), or None when it reads cleanly."""
    try:
        rows = conn.execute(f"PRAGMA r{i}.quick_check(3)").fetchall()
    except sqlite3.DatabaseError as exc:
        return f"corrupt SQLite file ({exc})"
    lines = [ln.strip() for r in rows if r[0] != "ok" for ln in str(r[0]).splitlines()]
    problems = [ln for ln in lines if ln and not ln.startswith("***")]  # "*** in database r1 ***": our alias
    if lines:
        return f"corrupt SQLite file ({'; '.join(problems[:3])})"
    try:  # damage inside a blob passes the page checks: the chunks' checksums tell
        has = conn.execute(f"SELECT 1 FROM r{i}.pragma_table_info('points_packed') WHERE name = 'crc'").fetchone()
        bad = damaged(lambda sql, args: ([], conn.execute(sql, args).fetchall()), f"r{i}") if has else None
    except sqlite3.DatabaseError as exc:
        return f"corrupt SQLite file ({exc})"
    return f"corrupt SQLite file ({bad})" if bad else None


def _attach(conn: sqlite3.Connection, i: int, f: Path) -> None:
    with _reading(f):
        conn.execute(f"ATTACH DATABASE ? AS r{i}", (f"{f.resolve().as_uri()}?{_open_mode(f)}",))
        _check_store(conn, i, f)


def _try_attach(conn: sqlite3.Connection, i: int, f: Path, skipped: list[str]) -> bool:
    try:
        _attach(conn, i, f)
    except NotARunError as exc:
        skipped.append(str(exc))
        try:
            conn.execute(f"DETACH DATABASE r{i}")
        except sqlite3.DatabaseError:
            pass  # it was never attached
        return False
    return True


def _open_mode(f: Path) -> str:
    # Even read-only, SQLite leaves -wal and -shm files beside a WAL-mode file it reads. A closed rank
    # file (no -wal: its writer is gone and nothing is left to fold in) is read as immutable, which
    # creates nothing; a file with a -wal (a live writer, or a killed one) is read through its WAL.
    return "mode=ro" if Path(f"{f}-wal").exists() else "mode=ro&immutable=1"


def _check_store(conn: sqlite3.Connection, i: int, f: Path) -> None:
    names = {r[0] for r in conn.execute(f"SELECT name FROM r{i}.sqlite_master")}
    if not {"points", "series", "events", "run"} <= names:
        raise NotARunError(f"{f}: an SQLite file, but not a stethoscope store (tables: {sorted(names)})")


def _select(i: int, rank: int, name: str, conn: sqlite3.Connection | None = None) -> str:
    if conn is not None and name in _LATER and conn.execute(
            f"SELECT 1 FROM r{i}.sqlite_master WHERE name = ?", (name,)).fetchone() is None:
        cols = ", ".join(f"NULL AS {c.strip()}" for c in RANKED[name].split(","))
        return f"SELECT {rank} AS rank, {cols} WHERE 0"  # a store written before the table existed
    if name == "findings":  # from the events, not the file's own view (an older version's list of kinds)
        return f"SELECT {rank} AS rank, * FROM ({FINDINGS_FROM_EVENTS.format(events=f'r{i}.events')})"
    return f"SELECT {rank} AS rank, {RANKED[name]} FROM r{i}.{name}"


def _attach_views(conn: sqlite3.Connection, files: list[tuple[int, Path]],
                  skipped: list[str]) -> list[tuple[int, Path]]:
    kept = [(i, rank, f) for i, (rank, f) in enumerate(files) if _try_attach(conn, i, f, skipped)]
    if kept:
        _create_views(conn, [(i, rank) for i, rank, _ in kept])
    return [(rank, f) for _, rank, f in kept]


def _create_views(conn: sqlite3.Connection, attached: list[tuple[int, int]], replace: bool = False) -> None:
    """One temp view per table over the attached files r{i} of `attached` [(i, rank)]."""
    for name in RANKED:
        if replace:
            conn.execute(f"DROP VIEW IF EXISTS temp.{name}")
        parts = [_select(i, rank, name, conn) for i, rank in attached]
        conn.execute(f"CREATE TEMP VIEW {name} AS " + " UNION ALL ".join(parts))


def _copy_tables(conn: sqlite3.Connection, files: list[tuple[int, Path]],
                 skipped: list[str]) -> list[tuple[int, Path]]:
    # The copy is private and dropped on any error, so it needs no rollback journal.
    conn.execute("PRAGMA journal_mode = OFF")
    kept: list[tuple[int, Path]] = []
    for start in range(0, len(files), MAX_ATTACHED):
        group = files[start:start + MAX_ATTACHED]
        attached = [(i, rank, f) for i, (rank, f) in enumerate(group) if _try_attach(conn, i, f, skipped)]
        conn.execute("BEGIN")  # one transaction per group: SQLite cannot DETACH a file a transaction read
        for i, rank, f in attached:
            created = conn.execute("SELECT 1 FROM main.sqlite_master WHERE name = 'metrics'").fetchone()
            if _copy_rank(conn, i, rank, create=created is None, problem=skipped, f=f):
                kept.append((rank, f))
        conn.commit()
        for i, _, _ in attached:
            conn.execute(f"DETACH DATABASE r{i}")
    if kept:
        for table, cols in _INDEXES.items():
            conn.execute(f"CREATE INDEX {table}_by_rank ON {table} ({cols})")
    return kept


def _copy_rank(conn: sqlite3.Connection, i: int, rank: int, create: bool, problem: list[str], f: Path) -> bool:
    """Copy rank file r{i} into the private tables; False (its rows removed, `problem` told) when it is corrupt."""
    if create:  # CREATE TABLE AS keeps the columns' affinities, so comparisons match the views'
        for name in RANKED:
            conn.execute(f"CREATE TABLE main.{name} AS {_select(i, rank, name, conn)} LIMIT 0")
    try:
        for name in RANKED:
            conn.execute(f"INSERT INTO main.{name} {_select(i, rank, name, conn)}")
    except sqlite3.DatabaseError as exc:
        for name in RANKED:
            conn.execute(f"DELETE FROM main.{name} WHERE rank = ?", (rank,))
        problem.append(f"{f}: corrupt SQLite file ({exc})")
        return False
    return True


def _authorize(action: int, *_: object) -> int:
    return sqlite3.SQLITE_OK if action in _ALLOWED else sqlite3.SQLITE_DENY


def _refusal(sql: str, exc: sqlite3.DatabaseError, path: Path) -> Exception:
    text = str(exc)
    if any(k in text for k in ("not authorized", "readonly", "query_only", "cannot modify")):
        return QueryRefused(f"query refused: only reading is allowed (no writes, ATTACH, pragmas or schema "
                            f"changes): {sql.strip()[:80]!r}")
    if _is_corrupt(exc):
        return NotARunError(f"{path}: a rank file is corrupt ({text})")
    if text.startswith(("no such table", "no such column")):
        return QueryRefused(f"query failed: {text}; tables: {', '.join(RANKED)} "
                            f"(columns and units: stethoscope query {path} --schema)")
    return QueryRefused(f"query failed: {text}")
