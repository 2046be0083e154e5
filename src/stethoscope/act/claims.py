"""One page across ranks for a run-wide incident (catalogue `run_wide`: a hang stalls every rank).

The ranks of a run write into one run directory. The first rank to create the claim file
`RUN_DIR/.alert-claims/<type>@<step>` (O_EXCL: atomic on a local disk and on NFS) pages; a rank that
finds a claim of the same incident leaves it to the rank that holds it. The same incident: a claim at
that step or the one before or after (ranks stall one step apart) whose onset lies within `window_s`
of this rank's (a restarted run that stalls at the same step again, later, is a new incident and
replaces the old claim). Where the directory cannot be written, every rank pages (a page too many is
better than none); the alert key carries no rank for these types, so PagerDuty still folds the ranks'
triggers into one alert.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

CLAIMS_DIR = ".alert-claims"


def claim(run_dir: str, type_: str, step: int | None, rank: int, onset: float, window_s: float) -> int | None:
    """None when this rank now holds the incident (it pages); otherwise the rank that holds it."""
    if not run_dir or not Path(run_dir).is_dir():  # no run folder to share: no other rank to share it with
        return None
    folder = Path(run_dir) / CLAIMS_DIR
    at = step if step is not None else -1
    mine = json.dumps({"rank": rank, "onset": onset})
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for near in (at, at - 1, at + 1):
            holder = _same(folder / f"{type_}@{near}", onset, window_s)
            if holder is not None and holder != rank:  # our own claim (a NaN back after a rollback): our rules decide
                return holder
        path = folder / f"{type_}@{at}"
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:  # another rank just claimed it, or an old incident's claim is there
            holder = _same(path, onset, window_s)
            if holder is not None and holder != rank:
                return holder
            tmp = folder / f".{type_}@{at}.{rank}.tmp"
            tmp.write_text(mine)
            os.replace(tmp, path)
            return None
        with os.fdopen(fd, "w") as f:
            f.write(mine)
    except OSError:
        return None
    return None


def _same(path: Path, onset: float, window_s: float) -> int | None:
    """The rank holding the claim at `path` when it is of the same incident (its onset within the window)."""
    try:
        text = path.read_text()
    except OSError:
        return None
    try:
        held: Any = json.loads(text)
        return int(held["rank"]) if abs(float(held["onset"]) - onset) <= window_s else None
    except (ValueError, KeyError, TypeError):
        return -1  # being written this instant by the rank that created it: that rank pages
