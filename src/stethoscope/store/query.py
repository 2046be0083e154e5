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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stethoscope.errors import NotARunError, QueryRefused
from stethoscope.store.schema import RANK_FILE_GLOB, RANKED

_RANK_RE = re.compile(r"rank-(\d+)\.sqlite$")
# SQLite caps ATTACH at 10 databases unless compiled otherwise (setlimit cannot raise it).
MAX_ATTACHED = 10
# Indexes on the copied tables of a run with more ranks than that: the reads the CLI makes.
_INDEXES = {"metrics": "rank, name, step", "points": "rank, series_id, step", "events": "rank, kind, step",
            "series": "rank, id", "run": "rank, key"}

_NAN = float("nan")
_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}


def rank_files(path: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """The (rank, file) pairs of a run directory, or of a single rank file given directly."""
    p = Path(path)
    if p.is_file():
        m = _RANK_RE.search(p.name)
        if m is None and p.suffix not in (".sqlite", ".db"):
            raise NotARunError(f"{p}: not a stethoscope run store (expected a run directory or a rank-*.sqlite file)")
        return [(int(m.group(1)) if m else 0, p)]
    if not p.exists():
        raise NotARunError(f"{p}: no such file or directory")
    found = sorted((int(m.group(1)), f) for f in p.glob(RANK_FILE_GLOB) if (m := _RANK_RE.search(f.name)))
    if not found:
        raise NotARunError(f"{p}: not a stethoscope run (no {RANK_FILE_GLOB} files); "
                           "run `stethoscope runs` to list runs, or `stethoscope import` a foreign log")
    return found


def is_run(path: str | os.PathLike[str]) -> bool:
    try:
        rank_files(path)
    except NotARunError:
        return False
    return True


@dataclass
class RunReader:
    """A read-only view over all rank files of one run."""

    path: Path
    conn: sqlite3.Connection
    ranks: list[int]

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Run one read-only statement; returns (column names, rows)."""
        try:
            cur = self.conn.execute(sql, params)
            rows = cur.fetchall()
        except sqlite3.DatabaseError as exc:
            raise _refusal(sql, exc) from None
        except (sqlite3.ProgrammingError, sqlite3.Warning) as exc:
            raise QueryRefused(f"query refused: {exc}") from None
        cols = [d[0] for d in cur.description or ()]
        return cols, rows

    def series(self, name: str, rank: int | None = None) -> tuple[list[int], list[float]]:
        """Steps and values of one metric (rank 0, or the lowest rank present, by default)."""
        rank = self.ranks[0] if rank is None else rank
        _, rows = self.query("SELECT step, value FROM metrics WHERE rank = ? AND name = ? ORDER BY step", (rank, name))
        return [r[0] for r in rows], [_NAN if r[1] is None else r[1] for r in rows]

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
    """Open every rank file of the run at `path` read-only. Raises NotARunError on anything else."""
    files = rank_files(path)
    attach = len(files) <= MAX_ATTACHED
    # "" is a private on-disk temporary database, deleted on close: nothing is written to the run.
    conn = sqlite3.connect(":memory:" if attach else "", uri=True, check_same_thread=False)
    try:
        with _reading(path):  # errors of one file already name it; this catches the rest
            if attach:
                _attach_views(conn, files)
            else:
                _copy_tables(conn, files)
    except BaseException:
        conn.close()
        raise
    conn.execute("PRAGMA query_only = ON")
    conn.set_authorizer(_authorize)
    return RunReader(Path(path), conn, [r for r, _ in files])


@contextmanager
def _reading(what: str | os.PathLike[str]) -> Iterator[None]:
    try:
        yield
    except sqlite3.DatabaseError as exc:
        raise NotARunError(f"{what}: not a readable stethoscope store ({exc})") from None


def _attach(conn: sqlite3.Connection, i: int, f: Path) -> None:
    with _reading(f):
        conn.execute(f"ATTACH DATABASE ? AS r{i}", (f"{f.resolve().as_uri()}?{_open_mode(f)}",))
        _check_store(conn, i, f)


def _open_mode(f: Path) -> str:
    # Even read-only, SQLite leaves -wal and -shm files beside a WAL-mode file it reads. A closed rank
    # file (no -wal: its writer is gone and nothing is left to fold in) is read as immutable, which
    # creates nothing; a file with a -wal (a live writer, or a killed one) is read through its WAL.
    return "mode=ro" if Path(f"{f}-wal").exists() else "mode=ro&immutable=1"


def _check_store(conn: sqlite3.Connection, i: int, f: Path) -> None:
    names = {r[0] for r in conn.execute(f"SELECT name FROM r{i}.sqlite_master")}
    if not {"points", "series", "events", "run"} <= names:
        raise NotARunError(f"{f}: an SQLite file, but not a stethoscope store (tables: {sorted(names)})")


def _select(i: int, rank: int, name: str) -> str:
    return f"SELECT {rank} AS rank, {RANKED[name]} FROM r{i}.{name}"


def _attach_views(conn: sqlite3.Connection, files: list[tuple[int, Path]]) -> None:
    for i, (_, f) in enumerate(files):
        _attach(conn, i, f)
    for name in RANKED:
        parts = [_select(i, rank, name) for i, (rank, _) in enumerate(files)]
        conn.execute(f"CREATE TEMP VIEW {name} AS " + " UNION ALL ".join(parts))


def _copy_tables(conn: sqlite3.Connection, files: list[tuple[int, Path]]) -> None:
    # The copy is private and dropped on any error, so it needs no rollback journal.
    conn.execute("PRAGMA journal_mode = OFF")
    for start in range(0, len(files), MAX_ATTACHED):
        group = files[start:start + MAX_ATTACHED]
        for i, (_, f) in enumerate(group):
            _attach(conn, i, f)
        conn.execute("BEGIN")  # one transaction per group: SQLite cannot DETACH a file a transaction read
        for i, (rank, f) in enumerate(group):
            with _reading(f):
                _copy_rank(conn, i, rank, create=start + i == 0)
        conn.commit()
        for i in range(len(group)):
            conn.execute(f"DETACH DATABASE r{i}")
    for table, cols in _INDEXES.items():
        conn.execute(f"CREATE INDEX {table}_by_rank ON {table} ({cols})")


def _copy_rank(conn: sqlite3.Connection, i: int, rank: int, create: bool) -> None:
    for name in RANKED:
        if create:  # CREATE TABLE AS keeps the columns' affinities, so comparisons match the views'
            conn.execute(f"CREATE TABLE main.{name} AS {_select(i, rank, name)} LIMIT 0")
        conn.execute(f"INSERT INTO main.{name} {_select(i, rank, name)}")


def _authorize(action: int, *_: object) -> int:
    return sqlite3.SQLITE_OK if action in _ALLOWED else sqlite3.SQLITE_DENY


def _refusal(sql: str, exc: sqlite3.DatabaseError) -> Exception:
    text = str(exc)
    if any(k in text for k in ("not authorized", "readonly", "query_only", "cannot modify")):
        return QueryRefused(f"query refused: only reading is allowed (no writes, ATTACH, pragmas or schema "
                            f"changes): {sql.strip()[:80]!r}")
    return QueryRefused(f"query failed: {text}")
