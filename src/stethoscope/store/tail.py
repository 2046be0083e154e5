"""What a live view needs from one rank store, read in one snapshot: each vital sign bucketed to the width
of a terminal (numpy over the series read from its packed chunks: no Python row per point), its last value,
the recent step rate, and the newest findings. Cheap enough to read every second while the run writes (WAL
readers never block the writer)."""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stethoscope import records as R
from stethoscope.errors import NotARunError, UsageError
from stethoscope.store import arrow, packed
from stethoscope.store.query import rank_files
from stethoscope.store.schema import NOT_FINDINGS_SQL

CURVES = (R.LOSS, R.EVAL_LOSS, R.GRAD_NORM, R.LR, R.TOKENS_PER_S)
RATES = (R.STEP_TIME, R.TOKENS_PER_S, R.MFU, R.DATA_WAIT, R.RSS, R.CUDA_PEAK, R.GPU_UTIL, R.GPU_TEMP, R.GPU_POWER,
         R.GPU_THROTTLE_THERMAL, R.GPU_THROTTLE_POWER, R.GPU_ECC_UNCORRECTED)
MAX_RANKS = 256  # the last step of every rank is read each refresh up to this many rank files


@dataclass
class Curve:
    """One series squeezed into `buckets` (mean per step range; None: no point there; nan: a NaN in it)."""

    name: str
    unit: str
    buckets: list[float | None]
    last: float | None
    last_step: int
    low: float | None
    high: float | None
    points: int


@dataclass
class Snapshot:
    run: Path
    rank: int
    ranks: int
    status: str
    last_step: int | None
    last_time: float | None
    steps_per_s: float | None
    curves: list[Curve] = field(default_factory=list)
    latest: dict[str, float | None] = field(default_factory=dict)
    findings: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    rank_steps: dict[int, int | None] = field(default_factory=dict)  # every rank's last step (up to MAX_RANKS)


def read(run: str | os.PathLike[str], rank: int | None = None, width: int = 60, findings: int = 8) -> Snapshot:
    """A snapshot of rank `rank` (default: the lowest) of the run at `run`."""
    files = rank_files(run)
    chosen = [(r, f) for r, f in files if rank is None or r == rank]
    if not chosen:
        raise NotARunError(f"{run}: no rank {rank} (ranks: {', '.join(str(r) for r, _ in files)})")
    r, f = chosen[0]
    conn = arrow.connect(f)
    try:
        conn.execute("BEGIN")
        snap = _read(conn, Path(run), r, len(files), max(8, width), findings)
    except (sqlite3.DatabaseError, packed.CorruptChunk) as exc:
        raise NotARunError(f"{f}: not a readable stethoscope store ({exc})") from None
    finally:
        conn.close()
    if 1 < len(files) <= MAX_RANKS:
        snap.rank_steps = {k: _last_step(g) for k, g in files}
    return snap


def _last_step(f: Path) -> int | None:
    """The last step rank file `f` recorded (None when it cannot be read: the view goes on without it)."""
    try:
        conn = arrow.connect(f)
    except UsageError:
        return None
    try:
        got = packed.newest(_query(conn), "main", times=False)
        if got is not None:
            return got[0]
        row = conn.execute("SELECT MAX((SELECT MAX(step) FROM points WHERE series_id = s.id)) FROM series s").fetchone()
        return row[0]
    except sqlite3.DatabaseError:
        return None
    finally:
        conn.close()


def _read(conn: sqlite3.Connection, run: Path, rank: int, ranks: int, width: int, n_findings: int) -> Snapshot:
    t0 = conn.execute("SELECT CAST(value AS REAL) FROM run WHERE key = 't0'").fetchone()
    t0 = t0[0] if t0 else None
    meta = dict(conn.execute("SELECT key, value FROM run WHERE key IN ('status', 'end_time')").fetchall())
    v3 = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'points_tail'").fetchone() is not None
    if v3:
        series = {name: (sid, unit, None, None) for sid, name, unit in conn.execute("SELECT id, name, unit FROM series")}
        top = packed.newest(_query(conn), "main", times=False)
        tops = [top[0]] if top and top[0] is not None else []
    else:  # a store of version 1/2: a `points` table, read with its primary key
        series = {name: (sid, unit, lo, hi) for sid, name, unit, lo, hi in conn.execute(
            "SELECT id, name, unit, (SELECT MIN(step) FROM points WHERE series_id = s.id), "
            "(SELECT MAX(step) FROM points WHERE series_id = s.id) FROM series s")}
        tops = [hi for *_, hi in series.values() if hi is not None]
    snap = Snapshot(run, rank, ranks, _status(meta), max(tops) if tops else None, None, None)
    snap.curves = [_curve(conn, name, series[name][0], series[name][1], width) for name in CURVES if name in series]
    for name in RATES:
        if name in series:
            snap.latest[name] = _last(conn, series[name][0])[1]
    rate_series = series.get(R.LOSS) or series.get(R.STEP_TIME) or next(iter(series.values()), None)
    if rate_series is not None:
        snap.steps_per_s, snap.last_time = _rate(conn, rate_series[0], t0)
    snap.findings, snap.counts = _findings(conn, n_findings)
    return snap


def _status(meta: dict[str, Any]) -> str:
    status = str(meta.get("status") or "-")
    try:
        return str(json.loads(status))
    except ValueError:
        return status


def _query(conn: sqlite3.Connection) -> packed.Query:
    return lambda sql, args: ([], conn.execute(sql, args).fetchall())


def _arrays(conn: sqlite3.Connection, sid: int) -> tuple[Any, Any]:
    """Steps and values of series `sid` in step order (NaN for NULL)."""
    import numpy as np

    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'points_packed'").fetchone() is not None:
        return packed.read_series(_query(conn), "main", sid)
    rows = conn.execute("SELECT step, value FROM points WHERE series_id = ? ORDER BY step", (sid,)).fetchall()
    return np.array([r[0] for r in rows], np.int64), np.array([r[1] for r in rows], np.float64)


def _last(conn: sqlite3.Connection, sid: int) -> tuple[int | None, float | None]:
    x, y = _arrays(conn, sid)
    if not len(x):
        return None, None
    return int(x[-1]), float(y[-1])


def _curve(conn: sqlite3.Connection, name: str, sid: int, unit: str, width: int) -> Curve:
    import numpy as np

    x, y = _arrays(conn, sid)
    if not len(x):
        return Curve(name, unit, [], None, 0, None, None, 0)
    lo, hi = int(x[0]), int(x[-1])
    # Integer bucket numbers 0..width-1 over the step range; a bucket's mean, or NaN when it holds a NaN.
    b = np.minimum((x - lo) * width // (hi - lo + 1), width - 1)
    nan = np.isnan(y)
    counts = np.bincount(b, minlength=width)
    nans = np.bincount(b, weights=nan, minlength=width)
    sums = np.bincount(b, weights=np.where(nan, 0.0, y), minlength=width)
    present = np.flatnonzero(counts)
    means = [float("nan") if nans[i] else float(sums[i] / (counts[i] - nans[i])) for i in present]
    if len(x) < width:  # fewer points than columns: one column per point, no gaps
        buckets: list[float | None] = means
    else:
        buckets = [None] * width
        for i, m in zip(present.tolist(), means):
            buckets[i] = m
    finite = y[~nan]
    return Curve(name, unit, buckets, float(y[-1]), int(x[-1]), float(finite.min()) if len(finite) else None,
                 float(finite.max()) if len(finite) else None, int(len(x)))


def _rate(conn: sqlite3.Connection, sid: int, t0: float | None, window: int = 50) -> tuple[float | None, float | None]:
    """Steps per second over the last `window` points of one series, and the time of its last point."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'points_tail'").fetchone() is not None:
        x, t = packed.newest_times(_query(conn), "main", sid, window)
        rows = list(zip(x.tolist(), t.tolist()))
    else:
        rows = conn.execute("SELECT step, time_ms FROM points WHERE series_id = ? AND time_ms IS NOT NULL "
                            "ORDER BY step DESC LIMIT ?", (sid, window)).fetchall()
    if not rows or t0 is None:
        return None, None
    last = t0 + rows[0][1] / 1000.0
    if len(rows) < 2 or rows[0][1] == rows[-1][1]:
        return None, last
    return (rows[0][0] - rows[-1][0]) / ((rows[0][1] - rows[-1][1]) / 1000.0), last


def _findings(conn: sqlite3.Connection, n: int) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The newest `n` findings, newest first; a finding the detector updated later (a spike that recovered)
    is shown once, in its latest words. Counts per severity count each finding once."""
    latest = (f"SELECT MAX(id) FROM events WHERE kind NOT IN {NOT_FINDINGS_SQL} GROUP BY kind, step")
    rows = conn.execute(f"SELECT id, step, time, kind, severity, source, message FROM events "
                        f"WHERE id IN ({latest}) ORDER BY id DESC LIMIT ?", (n,)).fetchall()
    keys = ("id", "step", "time", "type", "severity", "source", "message")
    counts = dict(conn.execute(f"SELECT severity, COUNT(*) FROM events WHERE id IN ({latest}) GROUP BY severity"))
    return [dict(zip(keys, r)) for r in rows], counts
