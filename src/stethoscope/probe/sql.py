"""Read-only SQL inside the live process: this rank's store (its rank file, opened `mode=ro`) plus live
tables filled at query time — `backtrace` (every thread's stack now) and `trace` (this process's sampled
per-module timings). The connection runs under the store's read-only authorizer (no writes, ATTACH,
pragmas or schema changes) and `query_only`; the live tables are refreshed with it lifted for a moment,
by us, never by the query."""

from __future__ import annotations

import re
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stethoscope.errors import NotARunError, QueryRefused, UsageError
from stethoscope.store import columnar
from stethoscope.store.query import _authorize as read_only_authorizer
from stethoscope.store.query import open_run

LIVE_TABLES = {
    "backtrace": "rank INTEGER, thread TEXT, main INTEGER, depth INTEGER, function TEXT, file TEXT, line INTEGER, "
                 "code TEXT",
    "trace": "rank INTEGER, step INTEGER, module TEXT, stage TEXT, duration REAL, memory REAL",
}
LiveRows = Callable[[str], list[tuple[Any, ...]]]


class LiveSQL:
    """One private read-only connection, serialized by a lock (server threads share it)."""

    def __init__(self, store: str | Path | None, live_rows: LiveRows, timeout_s: float = 10.0,
                 max_rows: int = 10_000, rank: int = 0) -> None:
        self.store = Path(store) if store else None
        self.rank = rank
        self.live_rows = live_rows
        self.timeout_s = timeout_s
        self.max_rows = max_rows
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._reader: Any = None

    def query(self, sql: str, engine: str = "auto") -> dict[str, Any]:
        """{"columns", "rows", "truncated", "engine"}; raises QueryRefused for anything but one reading
        statement. `engine`: "sqlite", "duckdb" (store/columnar.py: fast aggregates over the points), or
        "auto": DuckDB for a query over metrics/points when it is installed and understands the SQL."""
        if not isinstance(sql, str) or not sql.strip():
            raise QueryRefused("no SQL given")
        if engine not in columnar.ENGINES:
            raise QueryRefused(f"unknown engine {engine!r}; expected one of {', '.join(columnar.ENGINES)}")
        if engine == "duckdb" or (engine == "auto" and columnar.wants(sql) and columnar.available()):
            try:
                with self._lock:
                    result = columnar.query(self.store, self.rank, sql, LIVE_TABLES, self.live_rows, self.timeout_s,
                                            self.max_rows)
                    result["columns"] = self._sqlite_names(sql, result["columns"])
                    return result
            except ImportError:
                raise QueryRefused("engine duckdb needs duckdb and pyarrow: pip install 'stethoscope[probe]'") from None
            except UsageError as exc:
                raise QueryRefused(str(exc)) from None
            except columnar.CannotAnswer as exc:
                if engine == "duckdb":
                    raise QueryRefused(f"query failed (duckdb): {exc}") from None
        return dict(self._sqlite(sql), engine="sqlite")

    def _sqlite_names(self, sql: str, names: list[str]) -> list[str]:
        conn = self._connection()
        try:
            self._refresh(conn, sql)  # the live tables exist before SQLite prepares the query
        except sqlite3.Error:
            return names
        return columnar.sqlite_names(conn, sql, names)

    def _sqlite(self, sql: str) -> dict[str, Any]:
        with self._lock:
            conn = self._connection()
            self._refresh(conn, sql)
            deadline = time.monotonic() + self.timeout_s
            conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 20_000)
            try:
                cur = conn.execute(sql)
                rows = cur.fetchmany(self.max_rows + 1)
            except (sqlite3.Error, ValueError, OverflowError) as exc:
                raise _refusal(sql, exc, self.timeout_s) from None
            finally:
                conn.set_progress_handler(None, 0)
        cols = [d[0] for d in cur.description or ()]
        return {"columns": cols, "rows": [list(r) for r in rows[:self.max_rows]],
                "truncated": len(rows) > self.max_rows}

    def _connection(self) -> sqlite3.Connection:
        if self._reader is None and self.store is not None and self.store.is_file():
            try:
                reader = open_run(self.store)
            except NotARunError:
                reader = None  # the store is not written yet: live tables only, until it is
            if reader is not None:
                if self._conn is not None:
                    self._conn.close()
                self._reader, self._conn = reader, reader.conn
        if self._conn is None:
            conn = sqlite3.connect(":memory:", check_same_thread=False)
            conn.execute("PRAGMA query_only = ON")
            conn.set_authorizer(read_only_authorizer)
            self._conn = conn
        return self._conn

    def _refresh(self, conn: sqlite3.Connection, sql: str) -> None:
        wanted = [name for name in LIVE_TABLES if re.search(rf"\b{name}\b", sql, re.IGNORECASE)]
        if not wanted:
            return
        conn.set_authorizer(None)
        conn.execute("PRAGMA query_only = OFF")
        try:
            for name in wanted:
                kind = conn.execute("SELECT type FROM sqlite_temp_master WHERE name = ?", (name,)).fetchone()
                if kind is not None:
                    conn.execute(f"DROP {'VIEW' if kind[0] == 'view' else 'TABLE'} temp.{name}")
                conn.execute(f"CREATE TEMP TABLE {name} ({LIVE_TABLES[name]})")
                rows = self.live_rows(name)
                if rows:
                    marks = ",".join("?" * len(rows[0]))
                    conn.executemany(f"INSERT INTO temp.{name} VALUES ({marks})", rows)
            conn.commit()
        finally:
            conn.execute("PRAGMA query_only = ON")
            conn.set_authorizer(read_only_authorizer)

    def close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()


def _refusal(sql: str, exc: Exception, timeout_s: float) -> QueryRefused:
    text = str(exc)
    if "interrupted" in text:
        return QueryRefused(f"query interrupted after {timeout_s:g} s (query_timeout_s)")
    if any(k in text for k in ("not authorized", "authorization denied", "readonly", "query_only", "cannot modify",
                               "prohibited")):
        return QueryRefused(f"query refused: only reading is allowed (no writes, ATTACH, pragmas or schema "
                            f"changes): {sql.strip()[:80]!r}")
    if "one statement at a time" in text:
        return QueryRefused("query refused: one statement at a time")
    return QueryRefused(f"query failed: {text}")
