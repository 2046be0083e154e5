"""The run's folder: claimed at the start, and the run's facts (code version, host, launch, how it ended) in
the store's `run` table and, on rank 0, in the folder's `run.json` (for people and tools)."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stethoscope import records as R
from stethoscope.capture.runinfo import start_info
from stethoscope.store.db import fresh_run_dir, rank_path
from stethoscope.store.schema import RUN_META_FILE

log = logging.getLogger(__name__)


def claim_run_dir(run_dir: Path, rank: int, resume: bool) -> Path:
    """Where this run records: `run_dir`, or beside it (`run_dir-2`, …) when it holds an earlier run that
    is not being resumed (a run is never appended to unless resume=True). A path that is a file (or under one) is
    refused by name: a usage error at construction, before any step."""
    from stethoscope.errors import UsageError

    for part in (run_dir, *run_dir.parents):
        if part.exists() and not part.is_dir():
            raise UsageError(f"Monitor: {part} is a file, not a folder; give the run a directory path (it is "
                             f"created if missing)")
    fresh = fresh_run_dir(run_dir, rank, resume)
    if fresh != run_dir:
        log.warning("stethoscope: %s already holds a run (pass resume=True to continue it); recording this "
                    "run in %s", run_dir, fresh)
    return fresh


def write_run_json(run_dir: Path, info: dict[str, Any]) -> None:
    """Replace `run_dir/run.json` with `info` atomically. An OSError says which file and whether the
    directory is gone."""
    path = run_dir / RUN_META_FILE
    tmp = path.with_suffix(".json.tmp")
    try:
        tmp.write_text(json.dumps(R.json_safe(info), indent=1, default=str))
        os.replace(tmp, path)
    except OSError as exc:  # a full disk, or the run directory deleted under the live run
        gone = " (the run directory is gone: deleted while the run was live?)" if not run_dir.is_dir() else ""
        raise RunJsonError(f"writing {path}{gone}", exc) from exc


class RunJsonError(OSError):
    """run.json could not be written: `what` names the file, `cause` is the OSError."""

    def __init__(self, what: str, cause: OSError) -> None:
        super().__init__(str(cause))
        self.what, self.cause = what, cause


class RunFacts:
    """The facts of a live run: set in the store (on the writer thread, in order) and in run.json. A run.json
    that cannot be written is reported to `fail(exc, what)`; the run goes on."""

    def __init__(self, run_dir: Path, rank: int, world_size: int, config: Any, recorder: Any,
                 fail: Callable[[Exception, str], None]) -> None:
        self.run_dir, self.rank, self._recorder, self._fail = run_dir, rank, recorder, fail
        self.info = start_info(rank, world_size, config)
        first = _first_start(run_dir, rank)
        if first is not None:  # a resumed run keeps its start (show's duration, the report's); when it resumed
            self.info["resume_time"], self.info["start_time"] = self.info["start_time"], first
        self._recorder.call("set_meta", self.info)
        self._write()

    def add(self, **facts: Any) -> None:
        self.info.update(facts)
        self._recorder.call("set_meta", facts)
        self._write()

    def _write(self) -> None:
        if self.rank != 0:
            return
        try:
            write_run_json(self.run_dir, self.info)
        except RunJsonError as exc:
            self._fail(exc.cause, exc.what)  # at most twice a run


def _first_start(run_dir: Path, rank: int) -> float | None:
    """The start time an earlier session of this run recorded in its rank file (a resume), or None."""
    path = rank_path(run_dir, rank)
    if not path.is_file():
        return None
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            row = con.execute("SELECT value FROM run WHERE key = 'start_time'").fetchone()
        finally:
            con.close()
        return float(row[0]) if row else None
    except (sqlite3.Error, ValueError, TypeError):  # no run table yet, or a file of an older layout
        return None
