"""Runs as Hive-partitioned Parquet: the same data for DuckDB on a laptop and Spark or Trino on a cluster.

    DEST/metrics/run=NAME/rank=R/part-000000.parquet    step, name, value, time   (one row group per series chunk)
    DEST/events/run=NAME/rank=R/part-000000.parquet     id, step, time, kind, severity, source, message, data
    DEST/findings/run=NAME/rank=R/part-000000.parquet   id, step, time, type, severity, source, message, data
    DEST/series/run=NAME/rank=R/series.parquet          id, name, unit          (small: replaced each export)
    DEST/run/run=NAME/rank=R/run.parquet                key, value              (run metadata: replaced)
    DEST/_stethoscope_export.json                       what was exported: a watermark per run and rank

Appendable while a run goes on: each export reads only what lies past the watermark (per series the last
step exported, the last event id) and writes it as new part files; nothing already written is rewritten
or duplicated. One exception: a resume or rollback that re-recorded steps already exported (the store
keeps the old values in `points_superseded`) makes that rank's files be written again from the start.
Part files are written under a hidden name and renamed, and the state file is replaced after each rank;
a crashed export is repeated by the next one under the same part names (no duplicate). One export at a
time per DEST (a lock file).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from stethoscope.errors import InputError, NotARunError, UsageError
from stethoscope.store import arrow
from stethoscope.store.packed import CorruptChunk, damaged
from stethoscope.store.query import rank_files

STATE_FILE = "_stethoscope_export.json"
LOCK_FILE = ".stethoscope_export.lock"
APPENDED = ("metrics", "events", "findings")
REPLACED = ("series", "run")
DATASETS = APPENDED + REPLACED
MAX_ROW_GROUP = 1 << 20
STATE_FORMAT = 1


@dataclass
class RankExport:
    """What one export wrote for one rank."""

    run: str
    rank: int
    rows: dict[str, int] = field(default_factory=dict)
    files: int = 0
    bytes: int = 0
    rewritten: bool = False


@dataclass
class ExportResult:
    dest: Path
    ranks: list[RankExport] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def partition(run: str, rank: int) -> str:
    """`run=NAME/rank=R`: the name URI-escaped as Hive, Spark, DuckDB and pyarrow read it back."""
    return f"run={quote(run, safe='')}/rank={rank}"


def run_name(path: str | os.PathLike[str]) -> str:
    return Path(path).resolve().name


def export_runs(runs: Sequence[str | os.PathLike[str]], dest: str | os.PathLike[str],
                names: Sequence[str] | None = None, jobs: int = 1) -> ExportResult:
    """Export (or bring up to date) `runs` into `dest`; `names` overrides the run names (default: folder
    names); `jobs` ranks are read and written at once, each in its own process."""
    names = list(names) if names is not None else [run_name(r) for r in runs]
    _check_names(runs, names)
    out = Path(dest)
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out}: not a directory (the Parquet export goes into a directory)")
    arrow.require("pyarrow.parquet")
    out.mkdir(parents=True, exist_ok=True)
    result = ExportResult(out)
    with _locked(out):
        state = _load_state(out)
        tasks = []
        for run, name in zip(runs, names):
            files = rank_files(run)
            _claim(state, name, run, out)
            tasks += [(out, name, rank, f, state["runs"][name]["ranks"].get(str(rank))) for rank, f in files]
        failed: dict[str, UsageError] = {}
        for task, (done, mark) in zip(tasks, _run(tasks, jobs)):
            if isinstance(done, UsageError):  # one unreadable rank file: the others are still exported
                result.skipped.append(str(done))
                failed.setdefault(task[1], done)
                continue
            state["runs"][task[1]]["ranks"][str(task[2])] = mark
            result.ranks.append(done)
            _save_state(out, state)
    _no_rank_read(result, failed)
    return result


def _no_rank_read(result: ExportResult, failed: dict[str, UsageError]) -> None:
    """A run none of whose rank files could be read is an input error (exit status 2), as `show` and `query`
    make it, raised after the other runs are exported: a table of nothing and status 0 said it went well."""
    exported = {r.run for r in result.ranks}
    lost = [err for name, err in failed.items() if name not in exported]
    if lost:
        more = len(result.skipped) - 1
        raise UsageError(str(lost[0]) + (f" (and {more} more unreadable rank file(s))" if more else "")
                         + (f"; {len(exported)} other run(s) exported" if exported else ""))


def _run(tasks: list[tuple[Any, ...]], jobs: int) -> Iterator[tuple[Any, Any]]:
    if jobs <= 1 or len(tasks) <= 1:
        yield from map(_export_task, tasks)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # spawn: a fresh interpreter per worker (no fork of a process that may hold threads or open SQLite files)
    with ProcessPoolExecutor(min(jobs, len(tasks)), mp_context=multiprocessing.get_context("spawn")) as pool:
        yield from pool.map(_export_task, tasks)


def _export_task(task: tuple[Any, ...]) -> tuple[Any, Any]:
    dest, name, rank, f, mark = task
    try:
        return _export_rank(dest, name, rank, f, mark)
    except CorruptChunk as exc:
        return InputError(f, f"corrupt SQLite file ({exc})"), None
    except UsageError as exc:
        return exc, None
    except sqlite3.DatabaseError as exc:  # corrupt pages found while reading: the other ranks go on
        return InputError(f, f"corrupt SQLite file ({_damaged(f) or exc})"), None


def _damaged(f: Path) -> str | None:
    """Which packed chunk fails its checksum (SQLite says only "user-defined function raised exception")."""
    try:
        con = sqlite3.connect(f"file:{f}?mode=ro", uri=True)
        try:
            return damaged(lambda sql, args: ([], con.execute(sql, args).fetchall()), "main")
        finally:
            con.close()
    except sqlite3.Error:
        return None


def _check_names(runs: Sequence[Any], names: list[str]) -> None:
    if len(names) != len(runs):
        raise UsageError("give one name per run")
    seen: dict[str, Any] = {}
    for run, name in zip(runs, names):
        if not name or name in (".", ".."):
            raise UsageError(f"{run}: cannot name a run {name!r} in the export")
        if name in seen and Path(seen[name]).resolve() != Path(run).resolve():
            raise UsageError(f"two runs are named {name!r} ({seen[name]}, {run}); export them into different "
                             "destinations, or one at a time with --name")
        seen[name] = run


def _claim(state: dict[str, Any], name: str, run: Any, dest: Path) -> None:
    source = str(Path(run).resolve())
    entry = state["runs"].setdefault(name, {"source": source, "ranks": {}})
    if entry["source"] != source:
        raise UsageError(f"{dest} already holds a run named {name!r} exported from {entry['source']}; "
                         f"export {run} with --name OTHER, or into another destination")


def _export_rank(dest: Path, name: str, rank: int, f: Path, mark: dict[str, Any] | None) -> tuple[RankExport, Any]:
    """Write what rank file `f` holds past `mark` (its watermark); returns what was written and the new mark."""
    pq = arrow.require("pyarrow.parquet")
    mark = mark or _fresh_mark()
    done = RankExport(name, rank)
    conn = arrow.connect(f)
    try:
        conn.execute("BEGIN")  # one snapshot: the watermarks below match exactly the rows written
        if _rerecorded(conn, mark):
            _remove_rank(dest, name, rank)
            mark, done.rewritten = _fresh_mark(), True
        seq = mark["parts"]
        wrote = _write_metrics(pq, conn, dest, name, rank, seq, mark, done)
        wrote |= _write_events(pq, conn, dest, name, rank, seq, mark, done, f)
        for table in REPLACED:
            _write_file(pq, arrow.table(conn, table, path=f), _dir(dest, table, name, rank) / f"{table}.parquet",
                        done, row_groups=None)
        mark["superseded"] = conn.execute("SELECT COALESCE(MAX(rowid), 0) FROM points_superseded").fetchone()[0]
        conn.execute("COMMIT")
    finally:
        conn.close()
    mark["parts"] = seq + int(wrote)
    return done, mark


def _fresh_mark() -> dict[str, Any]:
    return {"parts": 0, "metrics": {}, "event_id": 0, "superseded": 0}


def _rerecorded(conn: Any, mark: dict[str, Any]) -> bool:
    """True when a step at or before a series' watermark was recorded again since the last export."""
    if not mark["metrics"]:
        return False
    rows = conn.execute("SELECT s.name, MIN(p.step) FROM points_superseded p JOIN series s ON s.id = p.series_id "
                        "WHERE p.rowid > ? GROUP BY s.name", (mark["superseded"],)).fetchall()
    return any(n in mark["metrics"] and step <= mark["metrics"][n] for n, step in rows)


def _write_metrics(pq: Any, conn: Any, dest: Path, name: str, rank: int, seq: int, mark: dict[str, Any],
                   done: RankExport) -> bool:
    chunks = list(arrow.metric_chunks(conn, mark["metrics"]))
    done.rows["metrics"] = sum(t.num_rows for _, t in chunks)
    if not chunks:
        return False
    _write_file(pq, [t for _, t in chunks], _dir(dest, "metrics", name, rank) / _part(seq), done)
    for series, tbl in chunks:
        mark["metrics"][series] = int(tbl.column("step")[-1].as_py())
    return True


def _write_events(pq: Any, conn: Any, dest: Path, name: str, rank: int, seq: int, mark: dict[str, Any],
                  done: RankExport, f: Path) -> bool:
    after = (mark["event_id"],)
    events = arrow.table(conn, "events", "WHERE id > ?", after, path=f)
    findings = arrow.table(conn, "findings", "WHERE id > ?", after, path=f)
    done.rows["events"], done.rows["findings"] = events.num_rows, findings.num_rows
    if not events.num_rows:
        return False
    _write_file(pq, [events], _dir(dest, "events", name, rank) / _part(seq), done)
    if findings.num_rows:
        _write_file(pq, [findings], _dir(dest, "findings", name, rank) / _part(seq), done)
    mark["event_id"] = int(events.column("id")[-1].as_py())
    return True


def _dir(dest: Path, table: str, name: str, rank: int) -> Path:
    return dest / table / partition(name, rank)


def _part(seq: int) -> str:
    return f"part-{seq:06d}.parquet"


def _write_file(pq: Any, tables: Any, target: Path, done: RankExport, row_groups: int | None = MAX_ROW_GROUP) -> None:
    """Write `tables` (one or more row groups each) to a hidden name, then rename: readers never see half a file."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    tables = tables if isinstance(tables, list) else [tables]
    with pq.ParquetWriter(tmp, tables[0].schema, compression="zstd") as writer:
        for tbl in tables:
            writer.write_table(tbl, row_group_size=row_groups or max(tbl.num_rows, 1))
    os.replace(tmp, target)
    done.files += 1
    done.bytes += target.stat().st_size


def _remove_rank(dest: Path, name: str, rank: int) -> None:
    for table in DATASETS:
        shutil.rmtree(_dir(dest, table, name, rank), ignore_errors=True)


# -- state and lock ----------------------------------------------------------------------------
def _load_state(dest: Path) -> dict[str, Any]:
    path = dest / STATE_FILE
    if not path.exists():
        if any((dest / t).exists() for t in DATASETS):
            raise UsageError(f"{dest}: holds Parquet files but no {STATE_FILE}; export into an empty directory "
                             "(or one an earlier `stethoscope export parquet` wrote)")
        return {"format": STATE_FORMAT, "runs": {}}
    try:
        state = json.loads(path.read_text())
        assert isinstance(state.get("runs"), dict)
    except (OSError, ValueError, AssertionError, AttributeError) as exc:
        raise UsageError(f"{path}: not a readable export state ({exc}); export into another directory") from None
    if state.get("format") != STATE_FORMAT:
        raise UsageError(f"{path}: export state format {state.get('format')!r}, expected {STATE_FORMAT}")
    return state


def _save_state(dest: Path, state: dict[str, Any]) -> None:
    tmp = dest / f".{STATE_FILE}.tmp"
    tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
    os.replace(tmp, dest / STATE_FILE)


@contextmanager
def _locked(dest: Path) -> Iterator[None]:
    import fcntl

    with open(dest / LOCK_FILE, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise UsageError(f"{dest}: another export is writing into it; try again when it is done") from None
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def is_export(path: str | os.PathLike[str]) -> bool:
    """True when `path` is a directory this module exported into."""
    return (Path(path) / STATE_FILE).is_file()


def exported_runs(path: str | os.PathLike[str]) -> list[str]:
    """The run names an export directory holds."""
    if not is_export(path):
        raise NotARunError(f"{path}: not a Parquet export (no {STATE_FILE})")
    return sorted(_load_state(Path(path))["runs"])
