"""Which importer reads a file, and reading every known log under a path.

The order of `default_importers()` is the sniffing order: formats recognised by name or by an
unmistakable structure first, the text dialects (whose regexes could match a stray line) next, and
the general console-log reader last: it takes what they all refuse, and a text log from which a
dedicated text reader read no step (`console.console_fallback`).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

from stethoscope.errors import InputError
from stethoscope.importers import line_records, restarts, running_means
from stethoscope.importers.held_out import eval_from_test
from stethoscope.importers.base import ImportedRun, Importer, iter_names
from stethoscope.importers.boxrecords import BoxRecordsImporter
from stethoscope.importers.console import ConsoleImporter, console_fallback
from stethoscope.importers.fairseq import FairseqImporter
from stethoscope.importers.hf import HFTrainerStateImporter
from stethoscope.importers.jsonmetrics import JSONMetricsImporter
from stethoscope.importers.loss_parts import loss_from_parts
from stethoscope.importers.lightning import LightningCSVImporter
from stethoscope.importers.megatron import MegatronImporter
from stethoscope.importers.mlflow_sqlite import MLflowSQLiteImporter
from stethoscope.importers.mlflow_store import MLflowStoreImporter
from stethoscope.importers.source import HEAD_BYTES, check_file, read_head
from stethoscope.importers.tabular import CSVImporter, JSONLImporter
from stethoscope.importers.tensorboard import TensorBoardImporter
from stethoscope.importers.textlog import TextLogImporter
from stethoscope.importers.yolo_results import YoloResultsImporter
from stethoscope.importers.texttable import TextTableImporter
from stethoscope.records import LOSS

logger = logging.getLogger(__name__)

# A second, longer look for text logs whose first metric line comes after a long preamble.
LONG_HEAD_BYTES = 8 * 1024 * 1024
MAX_FILES = 10_000
MAX_DEPTH = 8
_SKIP_DIRS = {"__pycache__", "node_modules", "site-packages", ".git", ".venv", "venv", ".ipynb_checkpoints"}
_CANDIDATE = re.compile(r"^(?:trainer_state\.json|meta\.yaml|mlflow\.db|.*history\.json|metrics\.json|.*metrics\.csv|"
                        r"events\.out\.tfevents\..*|.*\.(?:log|txt|jsonl|ndjson|csv|tsv|out|err))(?:\.gz)?$",
                        re.IGNORECASE)
# Dedicated text readers: when one of them reads no step, the general console reader gets a try.
_TEXT_READERS = frozenset({"megatron", "fairseq", "textlog"})
# Logs and tables a person writes runs into one after the other (a notebook's console, a sweep's table, mmengine's
# scalars.json appended to by each launch into the same work_dir).
_RESTARTED = frozenset({"console", "textlog", "jsonl"})
_CHECKPOINT_DIR = re.compile(r"^checkpoint-(\d+)$")


def default_importers() -> list[Importer]:
    """Fresh instances of every importer, in sniffing order."""
    return [HFTrainerStateImporter(), MLflowStoreImporter(), MLflowSQLiteImporter(), JSONMetricsImporter(), TensorBoardImporter(),
            LightningCSVImporter(), CSVImporter(),
            JSONLImporter(), MegatronImporter(), FairseqImporter(), BoxRecordsImporter(), YoloResultsImporter(),
            TextLogImporter(),
            TextTableImporter(),
            ConsoleImporter()]


def sniff_format(path: Path, importers: Sequence[Importer] | None = None) -> Importer:
    """The importer that reads `path`; InputError naming the formats tried when none does."""
    importers = default_importers() if importers is None else importers
    check_file(path)
    if path.stat().st_size == 0:
        raise InputError(path, "empty file: no training log in it (nothing to read)")
    head = read_head(path)
    found = _first(path, head, importers)
    if found is None and path.stat().st_size > HEAD_BYTES:
        found = _first(path, read_head(path, LONG_HEAD_BYTES), importers)
    if found is None:
        raise InputError(path, f"no known log format (tried: {', '.join(iter_names(importers))})")
    return found


def _first(path: Path, head: str, importers: Sequence[Importer]) -> Importer | None:
    return next((imp for imp in importers if imp.sniff(path, head)), None)


def read_any(path: Path, importers: Sequence[Importer] | None = None) -> list[ImportedRun]:
    """Every run read from `path`: one for a file; for a directory, one per known log file found in it
    (recursively), in path order. InputError when nothing there can be read."""
    path = Path(path)
    importers = default_importers() if importers is None else importers
    if not path.is_dir():
        return _read_all(sniff_format(path, importers), path)
    runs: list[ImportedRun] = []
    tried: list[str] = []
    for candidate in log_files(path):
        try:
            importer = sniff_format(candidate, importers)
        except InputError as exc:
            tried.append(f"{candidate.relative_to(path)} ({exc.problem})")
            continue
        try:
            runs += _read_all(importer, candidate)
        except InputError as exc:  # one unreadable file must not hide the others: an empty run says why
            logger.warning("%s", exc)
            runs.append(ImportedRun(str(candidate), importer.name, warnings=[str(exc)]))
    if not runs:
        looked = "; ".join(tried[:20]) if tried else (
            "no candidate files (trainer_state.json, metrics.csv, history.json, MLflow's meta.yaml or mlflow.db, "
            "events.out.tfevents.*, *.log, *.txt, *.jsonl, *.csv)")
        raise InputError(path, f"no known log found in this directory: {looked}")
    return runs


def _read_all(importer: Importer, path: Path) -> list[ImportedRun]:
    """Every run in one file: one, each run of a store that holds several (MLflow's `mlflow.db`), or each of
    several runs written one after the other into a log or table (`restarts.py`)."""
    several = getattr(importer, "read_runs", None)
    runs = several(path) if several else [_read(importer, path)]
    if len(runs) == 1 and runs[0].format in _RESTARTED:
        runs = restarts.split(runs[0])
    return [_finish(path, run) for run in runs]


def _read(importer: Importer, path: Path) -> ImportedRun:
    run = importer.read(path)
    if run.format == "fairseq" and run.meta.get("no_train_inner"):  # its summaries among another trainer's records:
        later = _next_reader(importer, path)  # that trainer's dedicated reader (LitGPT's `iter 4 step 1 |`, read at
        other = None if later is None else console_fallback(path, later.read(path))  # its step), as without them
        if other is not None and LOSS in set(other.columns.names):
            return other
    run = console_fallback(path, run) if importer.name in _TEXT_READERS else run
    return line_records.second_look(path, run) if run.format == "console" else run  # (records it could not number)


def _next_reader(importer: Importer, path: Path) -> Importer | None:
    """The dedicated text reader after `importer` in the sniffing order that claims `path` too (None: none)."""
    order = default_importers()
    names = [imp.name for imp in order]
    later = [imp for imp in order[names.index(importer.name) + 1:] if imp.name in _TEXT_READERS]
    return _first(path, read_head(path), later) if later else None


def _finish(path: Path, run: ImportedRun) -> ImportedRun:
    run = loss_from_parts(eval_from_test(run))
    running_means.declare(path, run)
    return run


def log_files(root: Path) -> list[Path]:
    """Candidate log files under `root`, sorted; hidden and tool folders are skipped, and of an HF output
    folder's trainer_state.json snapshots only the newest is kept."""
    found = sorted(_walk(root))
    return _drop_checkpoint_snapshots(found)


def _walk(root: Path) -> Iterator[Path]:
    count = 0
    for folder, dirs, files in os.walk(root):
        depth = len(Path(folder).relative_to(root).parts)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS and depth < MAX_DEPTH)
        for name in sorted(files):
            if _CANDIDATE.match(name):
                count += 1
                if count > MAX_FILES:
                    logger.warning("%s: more than %d candidate files; the rest are not read", root, MAX_FILES)
                    return
                yield Path(folder) / name


def _drop_checkpoint_snapshots(paths: list[Path]) -> list[Path]:
    """HF saves trainer_state.json into every checkpoint-N/ as a prefix of the final one: keep the
    folder's own file if it has one, else the highest N."""
    states = [p for p in paths if p.name == "trainer_state.json"]
    keep: dict[Path, Path] = {}
    for state in states:
        m = _CHECKPOINT_DIR.match(state.parent.name)
        owner = state.parent.parent if m else state.parent
        current = keep.get(owner)
        if current is None or _rank(state) > _rank(current):
            keep[owner] = state
    dropped = set(states) - set(keep.values())
    if dropped:
        logger.info("skipping %d checkpoint snapshots of trainer_state.json", len(dropped))
    return [p for p in paths if p not in dropped]


def _rank(state: Path) -> float:
    m = _CHECKPOINT_DIR.match(state.parent.name)
    return float(m.group(1)) if m else float("inf")
