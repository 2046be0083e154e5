"""The read side: every rank file of a run behind one read-only connection.

SQLite has no NaN: a NaN value is stored as NULL (a point row exists only when a value was
recorded, so a NULL value always means NaN); `series()` gives it back as float('nan').
Views `metrics`, `findings`, `alerts`, `events`, … are presented with a `rank` column over all rank
files. User SQL runs under an authorizer that allows reading only: writes, ATTACH, pragmas and
schema changes are refused with `QueryRefused`.
"""

from __future__ import annotations

import os
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stethoscope.errors import NotARunError, QueryRefused
from stethoscope.store.schema import RANK_FILE_GLOB, RANKED

_RANK_RE = re.compile(r"rank-(\d+)\.sqlite$")
# SQLite caps ATTACH at 10 databases unless compiled otherwise.
MAX_ATTACHED = 10

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
    if len(files) > MAX_ATTACHED:
        files = files[:MAX_ATTACHED]  # a later reader merges more; the first ten ranks are shown
    conn = sqlite3.connect(":memory:", uri=True, check_same_thread=False)
    try:
        for i, (_, f) in enumerate(files):
            conn.execute(f"ATTACH DATABASE ? AS r{i}", (f"{f.resolve().as_uri()}?mode=ro",))
            _check_store(conn, i, f)
        _create_views(conn, [r for r, _ in files])
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise NotARunError(f"{path}: not a readable stethoscope store ({exc})") from None
    conn.execute("PRAGMA query_only = ON")
    conn.set_authorizer(_authorize)
    return RunReader(Path(path), conn, [r for r, _ in files])


def _check_store(conn: sqlite3.Connection, i: int, f: Path) -> None:
    names = {r[0] for r in conn.execute(f"SELECT name FROM r{i}.sqlite_master")}
    if not {"points", "series", "events", "run"} <= names:
        raise NotARunError(f"{f}: an SQLite file, but not a stethoscope store (tables: {sorted(names)})")


def _create_views(conn: sqlite3.Connection, ranks: list[int]) -> None:
    for view, cols in RANKED.items():
        parts = [f"SELECT {rank} AS rank, {cols} FROM r{i}.{view}" for i, rank in enumerate(ranks)]
        conn.execute(f"CREATE TEMP VIEW {view} AS " + " UNION ALL ".join(parts))


def _authorize(action: int, *_: object) -> int:
    return sqlite3.SQLITE_OK if action in _ALLOWED else sqlite3.SQLITE_DENY


def _refusal(sql: str, exc: sqlite3.DatabaseError) -> Exception:
    text = str(exc)
    if any(k in text for k in ("not authorized", "readonly", "query_only", "cannot modify")):
        return QueryRefused(f"query refused: only reading is allowed (no writes, ATTACH, pragmas or schema "
                            f"changes): {sql.strip()[:80]!r}")
    return QueryRefused(f"query failed: {text}")
