"""Series a trainer logs as running means, declared on the run (`meta["running_means"]`) for the detectors.

mmengine's LogProcessor prints every key whose name contains "loss", and `time`, `data_time` and
`grad_norm`, as the mean of its last `window_size` values (default 10; a config dump's `log_processor =
dict(..., window_size=N)` says otherwise): the train loss over the last N iterations, the validation loss
over the last N validations. Its console (lines of the `mmengine` logger) and the scalars its visualizer
writes (rows with `data_time` and `time`; a `config.py` beside them) carry those means, not the values.
The declaration maps each series to its window, counted in the series' own values; `diagnose` passes the
eval loss's to the detectors (`DetectConfig.eval_loss_window`), which recover the evals from the means.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from stethoscope.importers.base import ImportedRun
from stethoscope.importers.source import read_head
from stethoscope.records import DATA_WAIT, EVAL_LOSS, GRAD_NORM, LOSS, STEP_TIME

META_KEY = "running_means"
MMENGINE_WINDOW = 10  # mmengine's LogProcessor default window_size

_TEXT_FORMATS = frozenset({"console", "textlog", "jsonl"})
_HEAD_BYTES = 4 * 1024 * 1024  # the environment and config dumps come before the first training line
_MMENGINE_LINE = re.compile(r" - mmengine - [A-Z]+ - (?:Iter|Epoch)\((?:train|val)\)")
_LOG_PROCESSOR = re.compile(r"log_processor\s*=\s*dict\(([^)]*)\)")
_WINDOW = re.compile(r"window_size\s*=\s*([^,\s)]+)")


def declare(path: Path, run: ImportedRun) -> None:
    """Sets `run.meta[META_KEY]` where `path` is a log whose trainer prints running means."""
    if run.format not in _TEXT_FORMATS:
        return  # the formats mmengine's logs are read as; no look into the others' files
    head = read_head(path, _HEAD_BYTES)
    if _MMENGINE_LINE.search(head) is None and not _mmengine_scalars(head):
        return
    config = _sibling_config(path)
    window = _window(head if config is None else config)
    if window is not None and window > 1:
        run.meta[META_KEY] = {name: window for name in (LOSS, EVAL_LOSS, STEP_TIME, DATA_WAIT, GRAD_NORM)}


def _mmengine_scalars(head: str) -> bool:
    """mmengine's scalars.json: JSON rows whose training rows carry `data_time`, `time` and `step`."""
    for line in head.splitlines()[:4]:
        try:
            row = json.loads(line)
        except ValueError:
            return False
        if isinstance(row, dict) and {"data_time", "time", "step"} <= row.keys():
            return True
    return False


def _sibling_config(path: Path) -> str | None:
    """The config mmengine's visualizer writes beside its scalars (vis_data/config.py)."""
    config = path.with_name("config.py")
    try:
        return config.read_text(errors="replace") if config.is_file() else None
    except OSError:
        return None


def _window(text: str) -> int | None:
    """The LogProcessor's window_size: from the config dump when it names one (None when it is not a
    count: 'global' or 'epoch' windows are not undone), else mmengine's default."""
    processor = _LOG_PROCESSOR.search(text)
    found = _WINDOW.search(processor.group(1)) if processor else None
    if found is None:
        return MMENGINE_WINDOW
    return int(found.group(1)) if found.group(1).isdigit() else None
