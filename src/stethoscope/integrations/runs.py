"""Where an adapter records its run: ROOT/stethoscope/NAME, the folder named after the run (its name in Prometheus
labels and Parquet exports: two runs recorded as `stethoscope` shared one)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from stethoscope.store.schema import RANK_FILE_GLOB


def default_run_dir(root: str | os.PathLike[str], name: str, resumed: bool) -> str:
    """ROOT/stethoscope/NAME; a resume of a run recorded before runs were named (ROOT/stethoscope holding the
    run itself) continues it there."""
    legacy = os.path.join(root, "stethoscope")
    if resumed and any(Path(legacy).glob(RANK_FILE_GLOB)):  # every rank decides alike
        return legacy
    return os.path.join(legacy, name)


def folder_name(path: str | os.PathLike[str]) -> str:
    return os.path.basename(os.path.normpath(os.path.abspath(path)))


def run_name(*candidates: Any) -> str:
    """The first non-empty candidate as a folder name: the run's name in Prometheus labels and Parquet exports
    (two runs recorded as `stethoscope` would share one)."""
    for c in candidates:
        if c is None or c == "":
            continue
        name = re.sub(r"[^A-Za-z0-9._=+-]+", "-", str(c)).strip("-.")
        if name:
            return name
    return "run"
