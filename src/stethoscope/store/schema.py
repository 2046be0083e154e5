"""The run store's schema: one SQLite file per rank, long format, WAL mode.

`points` is the bulk and is kept small on disk (~20 bytes a point): a WITHOUT ROWID table keyed by
(series_id, step), time as integer milliseconds since the run's `t0` (NULL when a foreign log had no
time). A value recorded again for a step already written (a resume, a rollback) moves the old row
to `points_superseded` instead of deleting it.
"""

from __future__ import annotations

SCHEMA_VERSION = 1

RANK_FILE_FORMAT = "rank-{rank:05d}.sqlite"
RANK_FILE_GLOB = "rank-*.sqlite"
RUN_META_FILE = "run.json"

TABLES = """
CREATE TABLE IF NOT EXISTS run (
    key   TEXT PRIMARY KEY,
    value TEXT
);
CREATE TABLE IF NOT EXISTS series (
    id   INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    unit TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS points (
    series_id INTEGER NOT NULL,
    step      INTEGER NOT NULL,
    time_ms   INTEGER,
    value     REAL,
    PRIMARY KEY (series_id, step)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS points_superseded (
    series_id     INTEGER NOT NULL,
    step          INTEGER NOT NULL,
    time_ms       INTEGER,
    value         REAL,
    superseded_ms INTEGER
);
CREATE TABLE IF NOT EXISTS events (
    id       INTEGER PRIMARY KEY,
    step     INTEGER,
    time     REAL,
    kind     TEXT NOT NULL,
    severity TEXT NOT NULL DEFAULT 'info',
    source   TEXT NOT NULL DEFAULT '',
    message  TEXT NOT NULL DEFAULT '',
    data     TEXT
);
CREATE INDEX IF NOT EXISTS events_kind ON events (kind, step);
CREATE TABLE IF NOT EXISTS batches (
    step INTEGER PRIMARY KEY,
    ids  TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS checkpoints (
    step    INTEGER NOT NULL,
    path    TEXT NOT NULL,
    bytes   INTEGER,
    digest  TEXT,
    status  TEXT NOT NULL DEFAULT 'ok',
    metrics TEXT
);
CREATE TABLE IF NOT EXISTS trace (
    step     INTEGER NOT NULL,
    module   TEXT NOT NULL,
    stage    TEXT NOT NULL,
    duration REAL,
    memory   REAL
);
CREATE TABLE IF NOT EXISTS stacks (
    snapshot INTEGER NOT NULL,
    time     REAL,
    thread   TEXT,
    depth    INTEGER,
    function TEXT,
    file     TEXT,
    line     INTEGER
);
"""

# Views for people and SQL users. `t0` lives in the run table as unix seconds.
VIEWS = """
CREATE VIEW IF NOT EXISTS metrics AS
    SELECT p.step AS step, s.name AS name, p.value AS value,
           (SELECT CAST(value AS REAL) FROM run WHERE key = 't0') + p.time_ms / 1000.0 AS time
    FROM points p JOIN series s ON s.id = p.series_id;
CREATE VIEW IF NOT EXISTS findings AS
    SELECT id, step, time, kind AS type, severity, source, message, data
    FROM events WHERE kind NOT IN ('alert', 'lifecycle', 'checkpoint', 'rollback');
CREATE VIEW IF NOT EXISTS alerts AS
    SELECT id, step, time, severity, source, message, data FROM events WHERE kind = 'alert';
"""

# Tables a multi-rank reader presents with a `rank` column (name -> columns).
RANKED = {
    "metrics": "step, name, value, time",
    "findings": "id, step, time, type, severity, source, message, data",
    "alerts": "id, step, time, severity, source, message, data",
    "events": "id, step, time, kind, severity, source, message, data",
    "series": "id, name, unit",
    "points": "series_id, step, time_ms, value",
    "points_superseded": "series_id, step, time_ms, value, superseded_ms",
    "batches": "step, ids",
    "checkpoints": "step, path, bytes, digest, status, metrics",
    "trace": "step, module, stage, duration, memory",
    "stacks": "snapshot, time, thread, depth, function, file, line",
    "run": "key, value",
}

PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    # NORMAL in WAL mode: a committed transaction survives a process crash (kill -9); only an OS
    # crash or power loss can lose the last commits. FULL would cost one fsync per flush.
    "PRAGMA synchronous=NORMAL",
    "PRAGMA busy_timeout=5000",
)
