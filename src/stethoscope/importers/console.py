"""Console logs of any trainer, read by the shape of their lines (`logtext/console_line.py`), not by a dialect.

The reader takes what the dedicated importers refuse (it is last in the sniffing order), and what they
read 0 steps from. Detection is by content: a text file qualifies when lines of its head carry a step
counter and a metric (or, for the 0-step report, when metric lines without a counter are all it has);
`meta["confidence"]` is the fraction of non-blank lines that were step lines and `meta["key_consistency"]`
the share of step lines with the most common set of keys.

Mixed content is read, not refused: ANSI colours are stripped, tracebacks, warnings and progress bars
go to the kept log lines, several launcher ranks interleaved keep one (the first seen, rank 0 in every
launcher we know; a warning names the others), and a step counter that goes back (a resume) is kept in file order as every importer
does. Lines without a counter belong to the step before them when they are a record of it: a dict repr
(the HF Trainer's `{'loss': …}` after its progress bar), an indented continuation (Composer's metric lines
after `[batch=N/T]:`), or eval values only (llm.c's `val loss X`). Progress-bar counters (`N/TOTAL [`) that
restart every epoch are made global by adding the earlier epochs' totals.

Speed (`logtext/console_reader.py`): a line's shape is its text with the digits removed; the first line of each
shape is parsed in full and teaches where its step and values are. A long run of lines of one shape is
found by comparing the lines' shapes with it in one C pass (`logtext/console_walk.py`; without the native
scanner, by counting copies of it in the log's shapes: no Python per line either; a big log is mapped, not
copied) and read at once, by
pyarrow's CSV reader (`logtext/console_arrow.py`), as one list of tokens (`logtext/console_tokens.py`) or by one regex
`findall` (`logtext/console_fast.py`); where shapes interleave (Composer's blocks, Keras' redrawn bar, eval lines
among step lines) the lines of each shape are read at once and merged back in line order
(`logtext/console_segment.py`).
"""

from __future__ import annotations

import re
import sys
import threading
from pathlib import Path
from typing import Any

from stethoscope.errors import InputError
from stethoscope.importers.base import ImportedRun
from stethoscope.logtext import linescan
from stethoscope.logtext.console_line import ANSI, key_name, parse
from stethoscope.logtext.console_names import distinct, resolve
from stethoscope.logtext.console_reader import NAME, ConsoleReader, has_loss
from stethoscope.logtext.summaries import SUMMARY
from stethoscope.logtext.names import known, metric
from stethoscope.importers.source import is_text, read_bytes, read_head
from stethoscope.logtext.table import to_float
from stethoscope.logtext.wrapped import rejoin
from stethoscope.records import LOSS

__all__ = ["NAME", "ConsoleImporter", "ConsoleReader", "console_fallback", "record_values", "strip_ansi",
           "zero_steps"]

SNIFF_LINES = 5000
_ANSI = re.compile(ANSI.pattern.encode())


class ConsoleImporter:
    """Any trainer's console log: a step counter and metrics per line, in the usual shapes."""

    name = NAME

    def sniff(self, path: Path, head: str) -> bool:
        if not is_text(head):
            return False
        steps, misses = _evidence(head)
        return steps >= 1 or misses >= 3

    def read(self, path: Path) -> ImportedRun:
        if "numpy" not in sys.modules:  # the reader needs it: imported on a thread while the log is read
            threading.Thread(target=_import_numpy, name="stethoscope-numpy", daemon=True).start()
        data: Any = linescan.mapped(str(path)) or rejoin(read_bytes(path))  # a big log mapped, not copied; a
        # terminal pane's hard-wrapped rows joined again (`logtext/wrapped.py`)
        if data.find(b"\x08") >= 0:  # Keras' backspaces before a redraw
            data = bytes(data).replace(b"\x08", b"")
        reader = ConsoleReader(str(path))
        reader.feed(data)
        run = reader.result()
        from stethoscope.logtext.twice_logged import once  # numpy: loaded when a log is read

        columns = once(run.columns)  # a record two loggers printed is one (`logtext/twice_logged.py`)
        if columns is run.columns:
            return run
        return ImportedRun(run.path, run.format, None, run.meta, run.warnings, run.lines, columns=columns)


def _import_numpy() -> None:
    try:
        import numpy  # noqa: F401
    except ImportError:  # the reader says so where it needs numpy
        pass


def _evidence(head: str, enough: int = 3) -> tuple[int, int]:
    """(step lines, metric lines without a step) among the head's first lines, counting up to `enough`."""
    steps = misses = 0
    for text in _clean(head).split("\n")[:SNIFF_LINES]:
        for segment in text.split("\r"):
            line = parse(segment)
            known = any(_is_metric(v.key, v.unit) for v in line.values)
            counted = line.step is not None or line.progress  # a sample counter numbers its records
            steps += known and counted
            misses += known and not counted
        if steps >= 1 or misses >= enough:
            break
    return steps, misses


def _head_run(path: Path) -> ImportedRun:
    """What the general reader reads from the head of `path` alone (for the closest shape of a 0-step log)."""
    reader = ConsoleReader(str(path))
    reader.feed(read_head(path).encode("utf-8", "replace").replace(b"\x08", b""))
    return reader.result()


def strip_ansi(data: bytes) -> bytes:
    """`data` without ANSI escape codes: the few distinct codes of the first MiB removed by plain
    replaces (each a memchr-speed pass), a regex only for what is left."""
    if b"\x1b" not in data:
        return data
    for code in set(_ANSI.findall(data, 0, 1 << 20)):
        data = data.replace(code, b"")
    return _ANSI.sub(b"", data) if b"\x1b" in data else data


def _clean(text: str) -> str:
    return (ANSI.sub("", text) if "\x1b" in text else text).replace("\x08", "")


def _is_metric(key: str, unit: str) -> bool:
    name = key_name(key, unit)
    if name is None:
        return False
    resolved = metric(name).name
    return "/" in resolved and (resolved != name or known(name)) or "loss" in _WORDS.split(name.lower())  # (a
    # loss of its own name, no train loss: PPO's `loss_critic=nan loss_objective=nan`, a GAN's `d_loss`)


_WORDS = re.compile(r"[^a-z0-9]+")


def zero_steps(run: ImportedRun) -> str:
    """What `diagnose` says of a log from which no training step was read."""
    closest = run.meta.get("closest")
    if closest is None:
        closest = _scan(Path(run.path))
    return f"read 0 training steps from {run.path} ({run.format}); closest shape seen: {closest}"


def _scan(path: Path) -> str:
    try:
        if not is_text(read_head(path)):
            return "none (not a text log)"
        return _head_run(path).meta.get("closest", "none")
    except InputError:
        return "none (not readable)"


def record_values(text: str) -> dict[str, float] | None:
    """The metrics of a record line that carries no step (a dict repr such as the HF Trainer prints),
    in our names and units; None when it has no loss (a config dict) or is a run summary."""
    if SUMMARY in text:
        return None
    reader = ConsoleReader("")
    line = parse(text)
    out: dict[str, float] = {}
    found = [(n, v) for v in line.values if (n := resolve(reader.names, v.key, v.unit, line.eval)) is not None]
    for (name, scale), value in distinct(found):  # `eval_loss` beside `eval_log_loss`: the closest spelling's
        number = to_float(value.text.replace(",", ""))
        if number is not None:
            out[name] = number * scale
    return out if has_loss((name, 1.0) for name in out) else None  # else a config dict, not metrics


def _has_loss(run: ImportedRun) -> bool:
    columns = run.columns
    return LOSS in (columns.labels if hasattr(columns, "labels") else set(columns.names))


def _losses(run: ImportedRun) -> int:
    """How many train-loss points `run` holds."""
    columns = run.columns
    if hasattr(columns, "labels"):
        return int((columns.codes == columns.labels.index(LOSS)).sum()) if LOSS in columns.labels else 0
    return columns.names.count(LOSS)


def _metrics(run: ImportedRun) -> bool:
    """Whether `run` holds a series other than a rate or a time (a bar's postfix metric, a dict's)."""
    columns = run.columns
    labels = columns.labels if hasattr(columns, "labels") else set(columns.names)
    return any(not name.startswith("perf/") for name in labels)


def _table(path: Path, head: str) -> ImportedRun | None:
    """The run of a table printed row by row, when the head holds one (`texttable`), else None."""
    from stethoscope.importers.texttable import TextTableImporter

    reader = TextTableImporter()
    return reader.read(path) if reader.sniff(path, head) else None


def console_fallback(path: Path, run: ImportedRun) -> ImportedRun:
    """`run` (read by a dedicated text importer) or, when it holds no step, what the table reader or the
    general reader reads.
    A textlog run read from progress bars alone (a checkpoint-loading bar in a log of another shape) is
    compared with the general reader's, and the one with more steps is kept; one read from eval lines alone (no
    train loss: LitGPT's `iter 400: val loss ..` among another trainer's records) gives way to a read with a train
    loss. A fairseq run read from end-of-epoch summaries alone (no `train_inner` record) gives way to the general
    reader's read when that has a train loss: the summaries' epoch means are not a step's loss (nor has a read of
    its `valid` lines alone a train loss). The whole file is
    read again only when its head has a step line the general reader can read."""
    bars_only = run.format == "textlog" and set(run.meta.get("dialects", {})) <= {"progress"}
    evals_only = run.format == "textlog" and not bars_only and not _has_loss(run)
    summaries = run.format == "fairseq" and run.meta.get("no_train_inner")  # among another trainer's records
    if run.columns.size and not bars_only and not evals_only and not summaries:
        return run
    head = read_head(path)
    if not is_text(head):
        return run
    table = _table(path, head)  # a metrics table with bars between its rows (fastai's epoch table, an eval's bar)
    if summaries:  # the other trainer's records, as the table or the general reader reads them (not the means)
        other = max((r for r in (table, ConsoleImporter().read(path)) if r is not None and _has_loss(r)),
                    key=lambda r: r.steps, default=None)
        return run if other is None else other
    records = 0 if bars_only and not _metrics(run) else run.steps  # a bar is a record when it carries a metric
    if table is not None and (_has_loss(table), table.steps) > (_has_loss(run), records) and (
            _has_loss(table) or not evals_only):
        return table
    if _evidence(head)[0] == 0:  # no step line in its head: only the closest shape is wanted (a bar log of GBs),
        head_run = _head_run(path)  # unless the bars gave no loss and its head has records all the same (an
        lines = bars_only and head_run.steps > records and _has_loss(head_run) >= _has_loss(run)  # epoch's, with
        if not lines and (_has_loss(run) or not _has_loss(head_run)):  # bars between), or more records than the
            run.meta.setdefault("closest", head_run.meta.get("closest"))  # bars (metric lines define the records)
            return run
    general = ConsoleImporter().read(path)
    dicts = run.meta.get("bar_dicts", 0)  # the HF Trainer's dicts under the loop's bar: its records, at its counts
    # (kept unless the general reader reads more train losses than they hold)
    if (_has_loss(general), general.steps) > (_has_loss(run), records) and (not dicts or _losses(general) > dicts) and (
            _has_loss(general) or not evals_only):  # bars without a loss (an eval's)
        # among step lines with one are not the training's steps, however many they are
        general.warnings.insert(0, f"{path}: the {run.format} reader read {run.steps} steps from it, the general "
                                   f"console reader {general.steps}: read as a console log")
        return general
    run.meta.setdefault("closest", general.meta.get("closest"))
    return run
