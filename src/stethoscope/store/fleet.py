"""SQL across many runs and ranks in embedded DuckDB: over rank stores, over a Parquet export, or both.

Every table has `run` (the run's folder name, or its name in the export) and `rank` columns in front of
the columns the single-run reader shows: `metrics(run, rank, step, name, value, time)`, `findings`,
`alerts`, `events`, `series`, `run` (metadata key/value), and, from rank stores only, `points`,
`points_superseded`, `batches`, `checkpoints`, `trace`, `stacks`.

Rank stores are read with Python's sqlite3 into Arrow tables (DuckDB's SQLite scanner is an extension
downloaded on first use: not offline) — only the tables a query names, each rank in one snapshot. A
Parquet export is read in place (`read_parquet`, Hive partitions), so only the row groups a query needs
are read. SQL is read-only: one SELECT (or EXPLAIN), no COPY, ATTACH, SET or PRAGMA, no files other than
the exports named.
"""

from __future__ import annotations

import os
import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stethoscope.errors import QueryRefused, UsageError
from stethoscope.store import arrow
from stethoscope.store.export import APPENDED, REPLACED, is_export
from stethoscope.store.packed import CorruptChunk
from stethoscope.store.query import rank_files
from stethoscope.store.schema import RANKED

BIG = 5_000_000  # rows read from rank stores past which a query suggests the Parquet export
EXPORTED = APPENDED + REPLACED  # the tables a Parquet export holds (and alerts, read from its events)


@dataclass
class Source:
    """One path given on the command line: a run (rank stores) or a Parquet export."""

    path: Path
    name: str = ""
    export: bool = False
    files: list[tuple[int, Path]] = field(default_factory=list)


def parse_ranks(text: str | None) -> set[int] | None:
    """`all` → None (every rank); `0,3,8-15` → that set; anything else a UsageError."""
    if text is None or text.strip().lower() == "all":
        return None
    ranks: set[int] = set()
    try:
        for part in text.split(","):
            lo, _, hi = part.strip().partition("-")
            ranks.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise UsageError(f"--ranks {text!r}: expected 'all' or a list like 0,3,8-15") from None
    return ranks


def sources(paths: list[str]) -> list[Source]:
    out = []
    for p in paths:
        out.append(Source(Path(p), export=True) if is_export(p) else Source(Path(p), files=rank_files(p)))
    names = [Path(s.path).resolve().name for s in out]
    for s, name in zip(out, names):  # a folder name shared by two runs: the paths as given tell them apart
        s.name = name if names.count(name) == 1 else str(s.path)
    return out


@dataclass
class FleetQuery:
    """A DuckDB connection with one view per table over `sources`; `query(sql)` → (columns, rows)."""

    sources: list[Source]
    ranks: set[int] | None = None
    skipped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    _con: Any = None
    _loaded: set[str] = field(default_factory=set)
    _locked: bool = False
    _absent: set[str] = field(default_factory=set)
    _untimed: set[str] = field(default_factory=set)  # metrics/points loaded without timestamps (packed chunks)

    def query(self, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        duckdb = arrow.require("duckdb")
        self._con = self._con or duckdb.connect(config={"autoinstall_known_extensions": False,
                                                        "autoload_known_extensions": False})
        statement = _one_select(self._con, sql)
        named = {t for t in RANKED if re.search(rf"\b{t}\b", sql, re.IGNORECASE)}
        times = arrow.reads_times(sql)  # else metrics/points come from the packed chunks, without timestamps
        for table in sorted((named - self._loaded) | (named & self._untimed if times else set())):
            self._view(table, times)
        self._lock()
        try:
            cur = self._con.execute(statement)
            rows = cur.fetchall()
        except duckdb.Error as exc:
            missing = [t for t in sorted(self._absent) if "Catalog" in type(exc).__name__ and t in str(exc)]
            if missing:
                raise QueryRefused(f"query failed: table {missing[0]} is not in a Parquet export (it holds "
                                   f"{', '.join(EXPORTED)}, alerts); query the run's stores for it") from None
            raise _refusal(exc) from None
        return _sqlite_names(sql, [d[0] for d in cur.description or ()]), rows

    def _view(self, table: str, times: bool = True) -> None:
        cols = "run, rank, " + RANKED[table]
        parts = []
        stores = [s for s in self.sources if not s.export]
        if stores:
            self._con.register(f"_stores_{table}", self._store_table(stores, table, times))
            if not times and table in ("metrics", "points"):
                self._untimed.add(table)
            else:
                self._untimed.discard(table)
            parts.append(f"SELECT {cols} FROM _stores_{table}")
        dataset = "events" if table == "alerts" else table  # alerts: the events whose kind is alert
        where = " WHERE kind = 'alert'" if table == "alerts" else ""
        for s in self.sources:
            if s.export and dataset in EXPORTED and any((s.path / dataset).rglob("*.parquet")):
                parts.append(f"SELECT {cols} FROM read_parquet({_quote(_glob(s.path, dataset))}, "
                             "hive_partitioning = true, hive_types = {'run': VARCHAR, 'rank': INTEGER}, "
                             f"union_by_name = true){where}")
        self._loaded.add(table)
        if not parts and dataset not in EXPORTED:  # a word in the SQL, maybe not a table: DuckDB will tell
            self._absent.add(table)
            return
        if not parts:  # exported, but no run had any rows of it (no findings yet)
            self._con.register(f"_empty_{table}", arrow.with_run_rank(arrow.schemas()[table].empty_table(), "", 0))
            parts.append(f"SELECT {cols} FROM _empty_{table}")
        keep = "" if self.ranks is None else f" WHERE rank IN ({', '.join(map(str, sorted(self.ranks))) or 'NULL'})"
        self._con.execute(f"CREATE OR REPLACE VIEW {table} AS SELECT * FROM ({' UNION ALL '.join(parts)}){keep}")

    def _store_table(self, stores: list[Source], table: str, times: bool = True) -> Any:
        pa = arrow.require("pyarrow")
        parts = []
        for s in stores:
            for rank, f in s.files:
                if self.ranks is not None and rank not in self.ranks:
                    continue
                try:
                    conn = arrow.connect(f)
                except UsageError as exc:
                    self._skip(str(exc))
                    continue
                try:
                    conn.execute("BEGIN")
                    parts.append(arrow.with_run_rank(arrow.read(conn, table, f, times=times), s.name, rank))
                except (sqlite3.DatabaseError, CorruptChunk) as exc:  # corrupt pages or chunk: the others are read
                    self._skip(f"{f}: corrupt SQLite file ({exc})")
                finally:
                    conn.close()
        if not parts:
            return arrow.with_run_rank(arrow.schemas()[table].empty_table(), "", 0)
        tbl = pa.concat_tables(parts)
        if tbl.num_rows >= BIG:
            self.notes.append(f"read {tbl.num_rows:,} rows of {table} from {len(parts)} rank files; to query them "
                              "often, `stethoscope export parquet RUN… DEST` once (it appends) and query DEST")
        return tbl

    def _skip(self, problem: str) -> None:
        if problem not in self.skipped:
            self.skipped.append(problem)

    def _lock(self) -> None:
        """No file access beyond the exports, no settings changed afterwards."""
        if self._locked:
            return
        self._locked = True
        allowed = [str(s.path.resolve()) + os.sep for s in self.sources if s.export]
        self._con.execute(f"SET allowed_directories = [{', '.join(map(_quote, allowed))}]")
        self._con.execute("SET enable_external_access = false")
        self._con.execute("SET lock_configuration = true")

    def close(self) -> None:
        if self._con is not None:
            self._con.close()

    def __enter__(self) -> FleetQuery:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _glob(path: Path, table: str) -> str:
    return str(path.resolve() / table / "**" / "*.parquet")


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _one_select(con: Any, sql: str) -> Any:
    duckdb = arrow.require("duckdb")
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise _refusal(exc) from None
    if len(statements) != 1:
        raise QueryRefused(f"query refused: give one statement, not {len(statements)}")
    kind = statements[0].type
    if kind not in (duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN):
        raise QueryRefused(f"query refused: only reading is allowed (no writes, COPY, ATTACH, SET or pragmas): "
                           f"{sql.strip()[:80]!r}")
    return statements[0]


def _refusal(exc: Exception) -> QueryRefused:
    text = " ".join(str(exc).split())
    if "Permission" in type(exc).__name__ or "disabled by configuration" in text:
        return QueryRefused(f"query refused: only the run stores and exports named can be read ({text})")
    if "Catalog" in type(exc).__name__:
        return QueryRefused(f"query failed: {text}; tables: {', '.join(RANKED)} (each with run and rank columns)")
    return QueryRefused(f"query failed: {text}")


def _sqlite_names(sql: str, names: list[str]) -> list[str]:
    """The column names one run's query gives (`min(value)`, SQLite's), where DuckDB says `min("value")`: the
    same SQL over several runs headed its columns otherwise. SQLite prepares it over empty tables of the same
    columns; DuckDB-only SQL (`arg_max`, `GROUP BY ALL`) keeps DuckDB's names."""
    from stethoscope.store.columnar import sqlite_names

    con = sqlite3.connect(":memory:")
    try:
        for table, cols in RANKED.items():
            con.execute(f"CREATE TABLE {table} (run, rank, {cols})")
        return sqlite_names(con, sql, names)
    finally:
        con.close()
