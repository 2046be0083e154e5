"""The columnar engine: a query over a run's points answered by embedded DuckDB (the live probe's `query`,
over its rank's store and live tables; `stethoscope query RUN`, over every rank file).

SQLite answers an aggregate by step window over 1M points in ~0.9 s here: it sorts every row into a
temporary B-tree to group them. DuckDB hash-aggregates the same million in ~40 ms on one thread, and the
points reach it from the store's packed chunks (store/packed.py: a few hundred blobs per series, ~25 ms
for 1M points) instead of a million Python rows. What a query names is loaded per query, in one read
snapshot of each rank file, so a live run's newest points are always in:

* `metrics(rank, step, name, value, time)` and `points(rank, series_id, step, time_ms, value)` from the
  packed chunks. The chunks hold no timestamps: when the SQL may read `time`/`time_ms` (it names them, or
  selects `*`) they are read row by row (~0.9 s per 1M points).
* the store's other tables and views (findings from the events), and the probe's live `backtrace` and
  `trace`, as they are.

SQLite's meaning is kept where the two differ in ways a query over metrics meets: `/` between integers
divides integers (`step / 1000` is a window number), NaN is NULL. What still differs: `LIKE` is
case-sensitive in DuckDB (use `ILIKE`), and some words are reserved (`GROUP BY window`: a parse error).
In `auto` mode (the default, when duckdb and pyarrow are installed) a query DuckDB cannot parse or bind
goes to SQLite instead, so anything SQLite answers is still answered; the reply names its engine.

Read-only like the SQLite path: one SELECT (or EXPLAIN), an in-memory database holding only the tables
loaded, no file access, settings locked, one thread (the training process keeps its cores), interrupted
after the query timeout.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stethoscope.errors import InputError, QueryRefused, UsageError
from stethoscope.store import arrow
from stethoscope.store.packed import CorruptChunk
from stethoscope.store.schema import RANKED

ENGINES = ("auto", "sqlite", "duckdb")
BIG_TABLES = ("metrics", "points")  # what auto sends to DuckDB: the tables whose size makes SQLite slow
_TYPES = {"INTEGER": "int64", "TEXT": "string", "REAL": "float64"}


class CannotAnswer(Exception):
    """DuckDB could not parse or bind the query (not a refusal): auto mode asks SQLite instead."""


def available() -> bool:
    try:
        import duckdb  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def wants(sql: str) -> bool:
    """Does this query read the big tables (the ones auto mode answers with DuckDB)?"""
    return any(re.search(rf"\b{t}\b", sql, re.IGNORECASE) for t in BIG_TABLES)


def query(store: Path | None, rank: int, sql: str, live: dict[str, str], live_rows: Callable[[str], list[tuple]],
          timeout_s: float, max_rows: int) -> dict[str, Any]:
    """{"columns", "rows", "truncated", "engine"} over one rank's store and the live tables. QueryRefused for
    what is not allowed or fails to run; CannotAnswer for SQL DuckDB does not understand."""
    return query_ranks([(rank, store)], sql, live, live_rows, timeout_s, max_rows)


def query_ranks(files: list[tuple[int, Path | None]], sql: str, live: dict[str, str] | None = None,
                live_rows: Callable[[str], list[tuple]] | None = None, timeout_s: float = 600.0,
                max_rows: int = 10**9) -> dict[str, Any]:
    """`query` over several rank files of one run (`stethoscope query RUN SQL`): each table holds every
    rank's rows, with its rank column."""
    live = live or {}
    duckdb = arrow.require("duckdb")
    con = duckdb.connect(config={"threads": 1, "autoinstall_known_extensions": False,
                                 "autoload_known_extensions": False})
    try:
        con.execute("SET integer_division = true")  # SQLite's `/` between integers (before parsing)
        statement = _one_select(con, sql)
        named = [t for t in (*RANKED, *live) if re.search(rf"\b{t}\b", sql, re.IGNORECASE)]
        for rank, store in files:
            _load(con, store, rank, [t for t in named if t in RANKED], {}, None, arrow.reads_times(sql))
        _union(con, [t for t in named if t in RANKED], [rank for rank, _ in files])
        _load(con, None, 0, [t for t in named if t in live], live, live_rows, False)
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
        timer = threading.Timer(timeout_s, con.interrupt)
        timer.start()
        try:
            cur = con.execute(statement)
            rows = cur.fetchmany(max_rows + 1)
        except duckdb.InterruptException:
            raise QueryRefused(f"query interrupted after {timeout_s:g} s (query_timeout_s)") from None
        except (duckdb.ParserException, duckdb.BinderException, duckdb.CatalogException) as exc:
            raise CannotAnswer(" ".join(str(exc).split())) from None
        except duckdb.Error as exc:
            raise QueryRefused(f"query failed: {' '.join(str(exc).split())}") from None
        finally:
            timer.cancel()
        cols = [d[0] for d in cur.description or ()]
    finally:
        con.close()
    return {"columns": cols, "rows": [list(r) for r in rows[:max_rows]], "truncated": len(rows) > max_rows,
            "engine": "duckdb"}


def sqlite_names(conn: sqlite3.Connection, sql: str, names: list[str]) -> list[str]:
    """The column names SQLite gives the same query (`AVG(value)` as written, where DuckDB says
    `avg("value")`): SQLite prepares it under `LIMIT 0`, which reads no row. DuckDB's names when SQLite
    cannot prepare it (DuckDB-only SQL) or it is not a plain SELECT."""
    body = sql.strip().rstrip(";")
    if not re.match(r"(?is)\s*(select|with)\b", body):
        return names
    try:
        cur = conn.execute(f"SELECT * FROM ({body}\n) LIMIT 0")
    except (sqlite3.Error, ValueError, OverflowError):
        return names
    found = [d[0] for d in cur.description or ()]
    return found if len(found) == len(names) else names


def _one_select(con: Any, sql: str) -> Any:
    import duckdb

    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise CannotAnswer(" ".join(str(exc).split())) from None
    if len(statements) != 1:
        raise QueryRefused("query refused: one statement at a time")
    if statements[0].type not in (duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN):
        raise QueryRefused(f"query refused: only reading is allowed (no writes, ATTACH, pragmas or schema "
                           f"changes): {sql.strip()[:80]!r}")
    return statements[0]


def _load(con: Any, store: Path | None, rank: int, named: list[str], live: dict[str, str],
          live_rows: Callable[[str], list[tuple]] | None, times: bool) -> None:
    pa = arrow.require("pyarrow")
    stored = [t for t in named if t in RANKED]
    conn = _open(store) if stored else None
    try:
        if conn is not None:
            conn.execute("BEGIN")  # one snapshot for every table of this query
        for table in stored:
            try:
                tbl = _stored(conn, table, times) if conn is not None else arrow.schemas()[table].empty_table()
            except CorruptChunk as exc:
                raise InputError(store, f"corrupt SQLite file ({exc})") from None
            con.register(f"_{table}_{rank}", _with_rank(tbl, rank))
    finally:
        if conn is not None:
            conn.close()
    for table in (t for t in named if t in live):
        cols = [c.strip().split() for c in live[table].split(",")]
        schema = pa.schema([(name, _TYPES[kind]) for name, kind in cols])
        rows = live_rows(table) if live_rows is not None else []
        columns = list(zip(*rows)) if rows else [() for _ in cols]
        con.register(f"_{table}", pa.table([pa.array(list(c), type=f.type) for c, f in zip(columns, schema)],
                                           schema=schema))
        con.execute(f"CREATE VIEW {table} AS SELECT * FROM _{table}")


def _union(con: Any, tables: list[str], ranks: list[int]) -> None:
    """One view per stored table over its ranks' registered tables."""
    for table in tables:
        parts = [f"SELECT * FROM _{table}_{rank}" for rank in ranks]
        con.execute(f"CREATE VIEW {table} AS {' UNION ALL '.join(parts)}")


def _open(store: Path | None) -> sqlite3.Connection | None:
    if store is None or not store.is_file():
        return None
    try:
        return arrow.connect(store)
    except (InputError, UsageError):
        return None


def _stored(conn: sqlite3.Connection, table: str, times: bool) -> Any:
    try:
        return arrow.read(conn, table, times=times, categorical=True)
    except sqlite3.OperationalError:  # a store written before the table existed
        return arrow.schemas()[table].empty_table()


def _with_rank(tbl: Any, rank: int) -> Any:
    import numpy as np

    return tbl.add_column(0, "rank", arrow.require("pyarrow").array(np.full(tbl.num_rows, rank, np.int64)))
