"""Anything a person points the CLI at — a stethoscope run or a foreign log — as `ImportedRun`s,
and foreign logs written into a run store (`stethoscope import`)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stethoscope.errors import InputError, UsageError
from stethoscope.importers.base import Columns, ImportedRun, LogLine
from stethoscope.importers.registry import read_any
from stethoscope.store.db import RunStore, rank_path
from stethoscope.store.query import RunReader, is_run, open_run
from stethoscope.store.schema import RESUME_KEY

if TYPE_CHECKING:
    from stethoscope.logtext.coded import CodedColumns

RUN_FORMAT = "stethoscope"
LOG_LINE_EVENT = "log_line"


def load(path: str | os.PathLike[str], rank: int | None = None) -> list[ImportedRun]:
    """A run directory (ours) or any foreign log file/directory, read into ImportedRuns."""
    p = Path(path)
    if not p.exists():
        raise InputError(p, "no such file or directory")
    if is_run(p):
        with open_run(p) as reader:
            return [from_store(reader, rank)]
    return read_any(p)


def from_store(reader: RunReader, rank: int | None = None) -> ImportedRun:
    """One rank of a stethoscope run (the lowest by default) in the importers' shape."""
    rank = reader.ranks[0] if rank is None else rank
    if rank not in reader.ranks:
        raise UsageError(f"{reader.path}: no rank {rank} (ranks: {', '.join(map(str, reader.ranks))})")
    cols = _packed_columns(reader, rank) or _row_columns(reader, rank)
    meta: dict[str, Any] = {}
    for key, value in reader.meta(rank).items():
        try:
            meta[key] = json.loads(value)
        except (TypeError, ValueError):
            meta[key] = value
    _, lines = reader.query("SELECT step, time, message, data FROM events WHERE rank = ? AND kind = ? ORDER BY id",
                            (rank, LOG_LINE_EVENT))
    log_lines = [LogLine(json.loads(d).get("line", 0) if d else 0, m, s, t) for s, t, m, d in lines]
    resumed = _resume_steps(reader, rank)
    if resumed:
        meta["resume_steps"] = resumed  # every resumed session's first step (`diagnose.resumes.session_starts`)
    fmt = meta.get("source_format") or RUN_FORMAT
    return ImportedRun(str(reader.path), str(fmt), None, meta, [], log_lines, columns=cols)


def _resume_steps(reader: RunReader, rank: int) -> list[int]:
    """The first step of each resumed session, from the Monitor's resume events (`store.schema.RESUME_KEY`)."""
    _, rows = reader.query("SELECT data FROM events WHERE rank = ? AND kind = 'lifecycle' AND source = 'monitor' "
                           "ORDER BY id", (rank,))
    steps = []
    for (data,) in rows:
        try:
            step = json.loads(data).get(RESUME_KEY) if data else None
        except (TypeError, ValueError, AttributeError):
            continue
        if isinstance(step, int):
            steps.append(step)
    return sorted(set(steps))


def _row_columns(reader: RunReader, rank: int) -> Columns:
    _, rows = reader.query("SELECT name, step, value, time FROM metrics WHERE rank = ? ORDER BY step", (rank,))
    nan = float("nan")
    cols = Columns.empty()
    for n, s, v, t in rows:
        cols.names.append(n)
        cols.steps.append(s)
        cols.values.append(nan if v is None else v)
        cols.times.append(t)
    return cols


def _packed_columns(reader: RunReader, rank: int) -> CodedColumns | None:
    """The rank's points in step order as arrays, from the store's packed chunks (1M points: ~0.1 s, where
    rows cost ~2.6 s); series in the order they were created within a step. Only the last point's time
    is kept (what diagnosis reads of the times). None when the rank file is not packed."""
    import numpy as np

    from stethoscope.errors import InputError
    from stethoscope.logtext.coded import CodedColumns
    from stethoscope.store.packed import CorruptChunk, read_series

    db = reader.aliases.get(rank)
    if db is None or not reader.query(f"SELECT 1 FROM {db}.sqlite_master WHERE name = 'points_packed'")[1] \
            or not reader.query(f"SELECT 1 FROM {db}.points_packed LIMIT 1")[1]:
        return None
    _, series = reader.query(f"SELECT id, name FROM {db}.series ORDER BY id")
    try:
        parts = [(name, *read_series(reader.query, db, sid)) for sid, name in series]
    except CorruptChunk as exc:  # named as show, watch and query name it: the file, then what is wrong
        raise InputError(dict(reader.files).get(rank, reader.path), f"corrupt SQLite file ({exc})") from None
    parts = [p for p in parts if len(p[1])]
    if not parts:
        return None
    steps = np.concatenate([p[1] for p in parts])
    order = np.argsort(steps, kind="stable")  # step order; within a step, the series' order
    codes = np.concatenate([np.full(len(p[1]), i, np.int32) for i, p in enumerate(parts)])[order]
    values = np.concatenate([p[2] for p in parts])[order]
    last = reader.query("SELECT MAX(time) FROM metrics WHERE rank = ? AND step = ?", (rank, int(steps[order[-1]])))[1]
    return CodedColumns([p[0] for p in parts], codes, steps[order], values, None,
                        last_time=last[0][0] if last else None)


Check = Callable[[list[ImportedRun]], list[ImportedRun]]


def import_into(source: str | os.PathLike[str], run_dir: str | os.PathLike[str],
                check: Check | None = None) -> list[tuple[Path, ImportedRun]]:
    """Write every log found at `source` into a run store: `run_dir` for one, `run_dir/<name>` for several.
    `check` sees the runs read before anything is written (the CLI's: a log with no training step is refused,
    as `diagnose` refuses it, not stored empty)."""
    runs = read_any(Path(source))
    if check is not None:
        runs = check(runs)
    targets = [Path(run_dir)] if len(runs) == 1 else [Path(run_dir) / _slug(r, i) for i, r in enumerate(runs)]
    for target, run in zip(targets, runs):
        if is_run(target):
            raise UsageError(f"{target}: already holds a run; import into a new directory")
        write_store(run, target)
    return list(zip(targets, runs))


def write_store(run: ImportedRun, target: Path) -> None:
    cols = run.columns
    times = [t for t in cols.times if t is not None]
    store = RunStore(rank_path(target, 0), t0=min(times) if times else time.time())
    try:
        batch = list(zip(cols.names, cols.steps, cols.values, cols.times))
        for k in range(0, len(batch), 100_000):
            store.write_points(batch[k:k + 100_000])
        store.write_events((ln.step, ln.time, LOG_LINE_EVENT, "info", "import", ln.text, {"line": ln.line})
                           for ln in run.lines)
        store.set_meta({**run.meta, "source_path": run.path, "source_format": run.format,
                        "imported_at": time.time(), "import_warnings": run.warnings, "status": "imported"})
    finally:
        store.close()


def _slug(run: ImportedRun, i: int) -> str:
    path = Path(run.path)
    name = path.parent.name if path.name in ("trainer_state.json", "metrics.csv") else path.stem
    name = str(run.meta.get("run_name") or "") or name  # a store of several runs (mlflow.db) names each
    return f"{i:02d}-{''.join(c if c.isalnum() or c in '-_.' else '_' for c in name)[:60]}"
