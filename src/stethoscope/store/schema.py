"""The run store's schema: one SQLite file per rank, long format, WAL mode.

Every point is stored once (store/packed.py): sealed chunks of a series in `points_packed` (~10 bytes a
point), rows in `points_tail` only for the newest points not sealed yet; the `points` view unpacks both
as the `points` table of version 2 held them: (series_id, step, time_ms, value), time as integer
milliseconds since the run's `t0` (NULL when a foreign log had no time), NaN as NULL. A value recorded
again for a step already written (a resume, a rollback) moves the old row to `points_superseded` instead
of deleting it. A rollback moves the points of the steps it abandons there too and notes the range in
`superseded` (with the last event recorded before it): `points`, and so `metrics`, hold the path that
continued. Stores of version 1/2 (a `points` table) are read as they are and converted when opened for
writing (store/packer.py).
"""

from __future__ import annotations

from stethoscope.records import UNITS

from stethoscope.store.packed import TABLE as PACKED_TABLE

# 2: points_packed (copies of the rows); 3: every point once (chunks + tail rows, `points` a view)
SCHEMA_VERSION = 3

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
CREATE TABLE IF NOT EXISTS points_superseded (
    series_id     INTEGER NOT NULL,
    step          INTEGER NOT NULL,
    time_ms       INTEGER,
    value         REAL,
    superseded_ms INTEGER
);
CREATE TABLE IF NOT EXISTS superseded (
    from_step  INTEGER NOT NULL,
    to_step    INTEGER NOT NULL,
    rollback   INTEGER NOT NULL,
    time       REAL,
    last_event INTEGER
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
""" + PACKED_TABLE

# Event kinds that are not findings: what the Monitor and its parts record about themselves, and the lines
# an imported log printed (evidence, not a detector's verdict). One list for the view, readers and `watch`.
NOT_FINDINGS = ("alert", "lifecycle", "checkpoint", "rollback", "recovery", "checkpoint_loaded", "checkpoint_skipped",
                "checkpoint_failed", "debug", "log_line")
# A resumed session's first step: a `lifecycle` event (source `monitor`, data {RESUME_KEY: step}) per resume, where
# the `run` table keeps only the newest `resume_time` (`capture.monitor`; read by `diagnose.sources`).
RESUME_KEY = "resumed_at_step"
NOT_FINDINGS_SQL = "(" + ", ".join(f"'{k}'" for k in NOT_FINDINGS) + ")"
FINDINGS_FROM_EVENTS = ("SELECT id, step, time, kind AS type, severity, source, message, data FROM {events} "
                        f"WHERE kind NOT IN {NOT_FINDINGS_SQL}")
"""The findings view's query over an events table (readers use it rather than a file's own view, which an
older version wrote with its own list of kinds)."""

# Views for people and SQL users (`points` and `metrics`: store/packed.py). `t0` lives in the run table as unix
# seconds.
VIEWS = """
CREATE VIEW IF NOT EXISTS findings AS
    SELECT id, step, time, kind AS type, severity, source, message, data FROM events WHERE kind NOT IN NOT_FINDINGS;
CREATE VIEW IF NOT EXISTS alerts AS
    SELECT id, step, time, severity, source, message, data FROM events WHERE kind = 'alert';
""".replace("NOT_FINDINGS", NOT_FINDINGS_SQL)

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
    "superseded": "from_step, to_step, rollback, time, last_event",
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

# What `stethoscope query RUN --schema` prints: every table a query can read, its columns and units.
SCHEMA_DOC: dict[str, dict[str, str]] = {
    "metrics": {"rank": "rank of the process that recorded it", "step": "training step (the log's own numbering)",
                "name": "metric key, e.g. train/loss, perf/step_time_s (units: see series)",
                "value": "the value (NULL means NaN)", "time": "unix seconds when it was recorded (NULL if unknown)"},
    "findings": {"rank": "", "id": "every finding the live detectors recorded, follow-ups unmerged (`diagnose` and "
                 "`show` merge them into incidents: fewer rows); none for an imported log",
                 "step": "step the finding starts at", "time": "unix seconds",
                 "type": "finding type (nan, loss_spike, divergence, …)", "severity": "info|warning|error|critical",
                 "source": "detector", "message": "what happened", "data": "the whole finding as JSON"},
    "alerts": {"rank": "", "id": "", "step": "", "time": "unix seconds", "severity": "", "source": "rule",
               "message": "", "data": "JSON"},
    "events": {"rank": "", "id": "", "step": "", "time": "unix seconds", "kind": "finding type, alert, lifecycle, "
               "checkpoint, rollback, recovery, log_line, debug (a stethoscope.debug report)", "severity": "",
               "source": "", "message": "", "data": "JSON"},
    "series": {"rank": "", "id": "", "name": "metric key", "unit": "its unit (s, GiB, tokens/s, fraction, …)"},
    "points": {"rank": "", "series_id": "series.id", "step": "", "time_ms": "ms since the run's t0 (run table)",
               "value": "NULL means NaN"},
    "points_superseded": {"rank": "", "series_id": "", "step": "", "time_ms": "ms since t0", "value": "",
                          "superseded_ms": "ms since t0 when a new value replaced it (a resume, a rollback)"},
    "batches": {"rank": "", "step": "", "ids": "JSON list of the sample ids in that step's batch"},
    "superseded": {"rank": "", "from_step": "first step a rollback abandoned", "to_step": "last step it abandoned",
                   "rollback": "the run's rollback number (1, 2, …)", "time": "unix seconds of the rollback",
                   "last_event": "events.id of the last event before it (older events in the range: abandoned path)"},
    "checkpoints": {"rank": "", "step": "", "path": "", "bytes": "size in bytes", "digest": "content hash",
                    "status": "'ok' unless verification failed", "metrics": "JSON"},
    "trace": {"rank": "", "step": "", "module": "", "stage": "", "duration": "", "memory": ""},
    "stacks": {"rank": "", "snapshot": "", "time": "unix seconds", "thread": "", "depth": "", "function": "",
               "file": "", "line": ""},
    "run": {"rank": "", "key": "run metadata key (config, argv, git, host, start_time, t0 …)",
            "value": "text or JSON"},
}


def schema_rows() -> list[tuple[str, str, str]]:
    """(table, column, unit or meaning) for every column a query can read, in the views' order."""
    rows = []
    for table, cols in RANKED.items():
        doc = SCHEMA_DOC.get(table, {})
        for col in ("rank", *(c.strip() for c in cols.split(","))):
            rows.append((table, col, doc.get(col, "") or ("rank of the process" if col == "rank" else "")))
    # the metric names stethoscope records itself, with their units (per-device copies end in /gpu<i>)
    rows += [("series.name", name, unit or "(no unit)") for name, unit in UNITS.items()]
    return rows
