"""A rank store's tables as Arrow tables, read column-wise: what the Parquet export and the DuckDB fleet
query are built on. Needs the `fleet` extra (pyarrow); nothing below the CLI imports this at import time.

Points are read one series at a time through the primary key into numpy arrays (`np.fromiter` over the
cursor: no Python row objects kept), so a 1M-point series costs one pass in C and ~24 MB. Values are
those of the store's views: `metrics.time` is the run's `t0` (as SQLite casts it) plus `time_ms / 1000`,
a NaN value is SQL NULL and stays null in Arrow.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from stethoscope.errors import InputError, UsageError
from stethoscope.store.packed import register
from stethoscope.store.schema import FINDINGS_FROM_EVENTS

FLEET_EXTRA = "pip install 'stethoscope[fleet]'"


def require(module: str) -> Any:
    """Import pyarrow / duckdb (and submodules), or a one-line UsageError naming the extra."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise UsageError(f"this needs {module.split('.')[0]}, which is not installed: {FLEET_EXTRA}") from None


def schemas() -> dict[str, Any]:
    """The Arrow schema of every table a fleet query or an export can hold (without `run` and `rank`)."""
    pa = require("pyarrow")
    i64, f64, s = pa.int64(), pa.float64(), pa.string()
    event = [("id", i64), ("step", i64), ("time", f64)]
    tail = [("severity", s), ("source", s), ("message", s), ("data", s)]
    return {name: pa.schema(cols) for name, cols in {
        "metrics": [("step", i64), ("name", s), ("value", f64), ("time", f64)],
        "findings": event + [("type", s)] + tail,
        "alerts": event + tail,
        "events": event + [("kind", s)] + tail,
        "series": [("id", i64), ("name", s), ("unit", s)],
        "points": [("series_id", i64), ("step", i64), ("time_ms", i64), ("value", f64)],
        "points_superseded": [("series_id", i64), ("step", i64), ("time_ms", i64), ("value", f64),
                              ("superseded_ms", i64)],
        "batches": [("step", i64), ("ids", s)],
        "checkpoints": [("step", i64), ("path", s), ("bytes", i64), ("digest", s), ("status", s), ("metrics", s)],
        "trace": [("step", i64), ("module", s), ("stage", s), ("duration", f64), ("memory", f64)],
        "stacks": [("snapshot", i64), ("time", f64), ("thread", s), ("depth", i64), ("function", s), ("file", s),
                   ("line", i64)],
        "run": [("key", s), ("value", s)],
    }.items()}


def connect(path: str | os.PathLike[str]) -> sqlite3.Connection:
    """A read-only connection to one rank file; a closed file (no -wal) is read as immutable (creates nothing)."""
    f = Path(path)
    mode = "mode=ro" if Path(f"{f}-wal").exists() else "mode=ro&immutable=1"
    try:
        conn = sqlite3.connect(f"{f.resolve().as_uri()}?{mode}", uri=True, isolation_level=None,
                               check_same_thread=False)
        register(conn)  # the `points` view unpacks the chunks with these (store/packed.py)
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    except sqlite3.DatabaseError as exc:
        raise InputError(f, f"not a readable stethoscope store ({exc})") from None
    if not {"points", "series", "events", "run"} <= names:
        conn.close()
        raise InputError(f, f"an SQLite file, but not a stethoscope store (tables: {sorted(names)})")
    return conn


def t0(conn: sqlite3.Connection) -> float | None:
    row = conn.execute("SELECT CAST(value AS REAL) FROM run WHERE key = 't0'").fetchone()
    return None if row is None else row[0]


def series_ids(conn: sqlite3.Connection) -> list[tuple[int, str]]:
    return [(int(i), str(n)) for i, n in conn.execute("SELECT id, name FROM series ORDER BY name")]


def series_points(conn: sqlite3.Connection, sid: int, after: int | None = None) -> Any:
    """(step int64, time_ms float64 with NaN for NULL, value float64 with NaN for NULL) of one series."""
    np = require("numpy")
    sql, args = "SELECT step, time_ms, value FROM points WHERE series_id = ?", [sid]
    if after is not None:
        sql, args = sql + " AND step > ?", [sid, after]
    cur = conn.execute(sql + " ORDER BY step", args)
    rows = np.fromiter(cur, dtype=[("step", "<i8"), ("time_ms", "<f8"), ("value", "<f8")])
    return rows["step"], rows["time_ms"], rows["value"]


def metric_chunk(name: str, steps: Any, time_ms: Any, values: Any, t0_s: float | None) -> Any:
    """One series' points as a `metrics` Arrow table (step, name, value, time)."""
    pa, np = require("pyarrow"), require("numpy")
    n = len(steps)
    if t0_s is None:
        times = pa.nulls(n, pa.float64())
    else:
        secs = t0_s + time_ms / 1000.0  # the view's arithmetic, in the same order: equal to the last bit
        times = pa.array(secs, mask=np.isnan(time_ms))
    names = pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)), pa.array([name]))
    return pa.table([pa.array(steps), names.cast(pa.string()), pa.array(values, mask=np.isnan(values)), times],
                    schema=schemas()["metrics"])


def metric_chunks(conn: sqlite3.Connection, after: dict[str, int] | None = None,
                  t0_s: float | None = None) -> Iterator[tuple[str, Any]]:
    """(name, Arrow table) per series with points after the step in `after` (by name; all when absent)."""
    t0_s = t0(conn) if t0_s is None else t0_s
    for sid, name in series_ids(conn):
        steps, time_ms, values = series_points(conn, sid, None if after is None else after.get(name))
        if len(steps):
            yield name, metric_chunk(name, steps, time_ms, values, t0_s)


def table(conn: sqlite3.Connection, name: str, where: str = "", args: tuple[Any, ...] = (),
          path: object = "") -> Any:
    """A small table or view of the store (events, findings, run, …) as Arrow, in the schemas() types."""
    pa = require("pyarrow")
    schema = schemas()[name]
    cols = ", ".join(schema.names)
    order = " ORDER BY id" if "id" in schema.names else ""
    source = f"({FINDINGS_FROM_EVENTS.format(events='events')}) AS findings" if name == "findings" else name
    rows = conn.execute(f"SELECT {cols} FROM {source} {where}{order}", args).fetchall()
    columns = list(zip(*rows)) if rows else [() for _ in schema.names]
    try:
        return pa.table([pa.array(list(c), type=f.type) for c, f in zip(columns, schema)], schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as exc:
        raise InputError(path, f"table {name} holds a value of an unexpected type ({exc})") from None


def points_table(conn: sqlite3.Connection) -> Any:
    """The raw `points` table (series_id, step, time_ms, value), column-wise."""
    pa, np = require("pyarrow"), require("numpy")
    parts = []
    for sid, _ in series_ids(conn):
        steps, time_ms, values = series_points(conn, sid)
        parts.append(pa.table([pa.array(np.full(len(steps), sid, dtype=np.int64)), pa.array(steps),
                               pa.array(time_ms, mask=np.isnan(time_ms)).cast(pa.int64()),
                               pa.array(values, mask=np.isnan(values))], schema=schemas()["points"]))
    return pa.concat_tables(parts) if parts else schemas()["points"].empty_table()


def reads_times(sql: str) -> bool:
    """May the query read timestamps (`time`, `time_ms`: not in the packed chunks)? It names them or selects
    `*` (a `*` of a product too: then the timestamps are read for nothing, never left out wrongly)."""
    rest = re.sub(r"count\s*\(\s*\*\s*\)", "", sql, flags=re.IGNORECASE)
    return bool(re.search(r"\btime(_ms)?\b", rest, re.IGNORECASE) or "*" in rest)


def read(conn: sqlite3.Connection, name: str, path: object = "", times: bool = True, categorical: bool = False) -> Any:
    """Table `name` of one rank file as Arrow (metrics and points column-wise). `times=False`: metrics and
    points from the packed chunks, ~20x faster, with NULL timestamps (for a query that reads none, see
    `reads_times`). `categorical`: metrics' names dictionary-encoded (one string per series)."""
    pa = require("pyarrow")
    if not times and name in ("metrics", "points"):
        packed = packed_table(conn, name, categorical)
        if packed is not None:
            return packed
    if name == "metrics":
        chunks = [t for _, t in metric_chunks(conn)]
        return pa.concat_tables(chunks) if chunks else schemas()["metrics"].empty_table()
    if name == "points":
        return points_table(conn)
    return table(conn, name, path=path)


def packed_table(conn: sqlite3.Connection, table: str, categorical: bool = False) -> Any:
    """metrics or points from the packed chunks (store/packed.py: a few hundred blobs per 1M points), timestamps
    NULL; None when the store has no packed chunks."""
    from stethoscope.store.packed import read_series

    if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'points_packed'").fetchone() or \
            not conn.execute("SELECT 1 FROM points_packed LIMIT 1").fetchone():
        return None  # not packed (written before packing, or by other means): the row reader is faster then
    np, pa = require("numpy"), require("pyarrow")
    schema = schemas()[table]
    parts: list[list[Any]] = []
    names: list[str] = []
    for sid, name in series_ids(conn):
        steps, values = read_series(lambda sql, args: ([], conn.execute(sql, args).fetchall()), "main", sid)
        n = len(steps)
        if not n:
            continue
        value = pa.array(values, mask=np.isnan(values))  # the store's NULL (SQLite keeps no NaN)
        if table == "metrics":  # the name dictionary-encoded: one string per series, not per point
            cols = [pa.array(steps), np.full(n, len(names), np.int32), value, pa.nulls(n, pa.float64())]
            names.append(name)
        else:
            cols = [pa.array(np.full(n, sid, np.int64)), pa.array(steps), pa.nulls(n, pa.int64()), value]
        parts.append(cols)
    if not parts:
        return schema.empty_table()
    if table == "metrics":  # every chunk shares the final dictionary
        dictionary = pa.array(names, pa.string())
        for cols in parts:
            cols[1] = pa.DictionaryArray.from_arrays(pa.array(cols[1]), dictionary)
        schema = schema.set(1, pa.field("name", pa.dictionary(pa.int32(), pa.string())))
    tbl = pa.Table.from_batches([pa.record_batch(cols, schema=schema) for cols in parts])
    return tbl if categorical or table != "metrics" else tbl.cast(schemas()["metrics"])


def with_run_rank(tbl: Any, run: str, rank: int) -> Any:
    """`tbl` with `run` and `rank` columns in front."""
    pa = require("pyarrow")
    n = tbl.num_rows
    run_col = pa.DictionaryArray.from_arrays(pa.array(require("numpy").zeros(n, dtype="int32")), pa.array([run]))
    tbl = tbl.add_column(0, "rank", pa.array(require("numpy").full(n, rank, dtype="int32")))
    return tbl.add_column(0, "run", run_col.cast(pa.string()))
