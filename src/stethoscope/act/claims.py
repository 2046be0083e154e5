"""One page across ranks for a run-wide incident (catalogue `run_wide`: a hang stalls every rank).

The ranks of a run write into one run directory. The first rank to create the claim file
`RUN_DIR/.alert-claims/<type>@<step>` (O_EXCL: atomic on a local disk and on NFS) pages; a rank
that finds the claim, or one for the step before or after (ranks stall one step apart), leaves the
incident to the rank that holds it. Where the directory cannot be written, every rank pages (a page
too many is better than none); the alert key carries no rank for these types, so PagerDuty still
folds the ranks' triggers into one alert.
"""

from __future__ import annotations

import os
from pathlib import Path

CLAIMS_DIR = ".alert-claims"


def claim(run_dir: str, type_: str, step: int | None, rank: int) -> int | None:
    """None when this rank now holds the incident (it pages); otherwise the rank that holds it."""
    if not run_dir:
        return None
    folder = Path(run_dir) / CLAIMS_DIR
    at = step if step is not None else -1
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for near in (at - 1, at + 1):
            holder = _holder(folder / f"{type_}@{near}")
            if holder is not None:
                return holder
        fd = os.open(folder / f"{type_}@{at}", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        holder = _holder(folder / f"{type_}@{at}")
        return holder if holder is not None else -1
    except OSError:
        return None
    with os.fdopen(fd, "w") as f:
        f.write(str(rank))
    return None


def _holder(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.lstrip("-").isdigit() else -1
