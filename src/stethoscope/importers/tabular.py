"""Generic tables of metrics: CSV (W&B history exports included) and JSON lines.

CSV: the step is the first of `_step`/`step`/`Step`/`global_step`/`iteration`/`iter`/`num_updates`/`current_steps`
columns (bare, else under `train/`, `trainer/` or `training/`), else an `epoch` column whose whole numbers rise on
every row (a table of one row an epoch: its findings speak of the epochs the file prints), else the row index
(from 0); the choice is noted in meta. `_timestamp`/`timestamp`/`wall_time` is the time.
W&B's `_runtime` becomes `perf/elapsed_s`; its panel exports (`run - metric`, `metric__MIN/__MAX`
columns) keep the metric and leave out the min/max bands; one of several runs side by side is read run by run
(`read_runs`, `wandb_export.py`), and so is each run of a long-format table of several (`restarts.py`). Other numeric columns keep their names
(mapped onto our vocabulary where we know them, values converted when the name gives a unit:
`step_ms` → `perf/step_time_s` in seconds); text columns are left out.
JSONL: one object per line, with a step key (as above, or fairseq's `num_updates`), or in a file with none an
`epoch` whose whole numbers rise line by line (DeiT/MAE's `log.txt`: one record an epoch); numbers written
as strings (fairseq) are read as numbers; bare NaN/Infinity are accepted; nested objects flatten
to `a/b`. A long-format table (`step,type,loss`: a column `type`/`split`/`phase` naming each row's split) names
a `val` row's metrics in the eval split.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from stethoscope.errors import InputError
from stethoscope.importers.base import ImportedRun
from stethoscope.importers.bookkeeping import is_progress, refuse_progress_only
from stethoscope.importers.epoch_rows import EPOCH_KEYS, Row, counter_key, epoch_steps, rising as _epochs
from stethoscope.importers.fairseq import fairseq_name
from stethoscope.logtext.names import FileNames, metric, rivals, scaled_row
from stethoscope.importers.stat_records import is_summary, summarised
from stethoscope.importers.restarts import table_runs
from stethoscope.importers.settings_tables import refuse_settings_table
from stethoscope.importers.wandb_export import side_by_side
from stethoscope.importers.source import is_text, log_name, read_text
from stethoscope.logtext.table import PointTable, describe, gc_paused, to_float
from stethoscope.records import LOSS, LR

CSV_NAME = "csv"
JSONL_NAME = "jsonl"
STEP_KEYS = ("_step", "step", "global_step", "iteration", "iter", "it", "num_updates",
             "current_steps")  # LLaMA-Factory's trainer_log.jsonl
# A step key may sit in the training namespace trainers log under (HF Trainer's W&B `train/global_step`,
# Lightning's `trainer/global_step`); other namespaces are left alone: `time/step` is a duration.
_STEP_NAMESPACES = ("trainer/", "train/", "training/")
TIME_KEYS = ("_timestamp", "timestamp", "wall_time", "walltime", "unix_time")
_KNOWN = {"_runtime": "perf/elapsed_s"}
_WANDB_RUN = re.compile(r"^.+? - (.+)$")
_METRICISH = re.compile(r"loss|acc|lr|learning|norm|epoch|perplex|ppl|score|f1|bleu|wer|reward|throughput",
                        re.IGNORECASE)


def step_key(keys: list[str]) -> str | None:
    """The key that holds the step among `keys` (case-insensitive), or None."""
    lowered = {k.strip().lower(): k for k in keys}
    names = STEP_KEYS + tuple(space + k for k in STEP_KEYS if k != "_step" for space in _STEP_NAMESPACES)
    return next((lowered[k] for k in names if k in lowered), None)


def time_key(keys: list[str]) -> str | None:
    lowered = {k.strip().lower(): k for k in keys}
    return next((lowered[k] for k in TIME_KEYS if k in lowered), None)


def unix_time(value: Any) -> float | None:
    """Unix seconds from a number (seconds or milliseconds) or an ISO-8601 string; naive = UTC."""
    number = to_float(value)
    if number is not None:
        return number / 1000.0 if number > 1e11 else number
    if not isinstance(value, str):
        return None
    try:
        stamp = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)).timestamp()


# -- CSV ------------------------------------------------------------------------------------------
class CSVImporter:
    """A CSV table of metrics with a header row (W&B history exports, hand-written logs)."""

    name = CSV_NAME

    def sniff(self, path: Path, head: str) -> bool:
        first = head.partition("\n")[0].removesuffix("\r")  # Windows line ends: a CR before each newline
        table_name = Path(log_name(path)).suffix.lower() in (".csv", ".tsv")
        if not is_text(head) or not table_name and ("\r" in first or "," not in first and "\t" not in first):
            return False
        try:
            header = _header(first)
        except csv.Error:
            return False
        named = len(header) >= 1 and (step_key(header) is not None or any(_METRICISH.search(h) for h in header))
        return named and (table_name or _table_body(head, header))  # Keras' CSVLogger writes `training.log`

    def read(self, path: Path) -> ImportedRun:
        header, rows = _csv_rows(path)
        return _csv_run(path, str(path), header, rows)

    def read_runs(self, path: Path) -> list[ImportedRun]:
        """The table's run, or each run of a W&B export of several side by side (`wandb_export.py`)."""
        header, rows = _csv_rows(path)
        step = step_key(header) or next((k for k in header if k.strip().lower() in EPOCH_KEYS), None)
        rows = list(rows) if step is not None else rows
        runs = side_by_side(header, rows, header.index(step)) if step is not None else None
        if runs is None and step is not None and (sweep := table_runs(header, rows, header.index(step))):
            return [_csv_run(path, f"{path}#{name}", header, cells, name, "long_format") for name, cells in sweep]
        if runs is None:
            return [_csv_run(path, str(path), header, rows)]
        return [_csv_run(path, f"{path}#{name}", names, cells, name) for name, names, cells in runs]


def _csv_rows(path: Path) -> tuple[list[str], Iterator[list[str]]]:
    text = read_text(path)
    first = text.partition("\n")[0]
    delimiter = "\t" if "\t" in first and "," not in first else ","
    rows = checked_rows(path, csv.reader(io.StringIO(text), delimiter=delimiter))
    header = next(rows, None)
    if not header:
        raise InputError(path, "empty CSV: expected a header row", line=1)
    return header, rows


def _csv_run(path: Path, label: str, header: list[str], rows: Any, run_name: str | None = None,
             dialect: str = "wandb_export") -> ImportedRun:
    with gc_paused():
        table, meta, warnings = _read_csv(path, header, rows)
        columns, rejected = table.build_columns()
    warnings += describe(rejected, lambda line: f"{path}:{line}")
    if run_name is not None:
        meta.update(dialect=dialect, run_name=run_name)
    return ImportedRun(label, CSV_NAME, None, meta, warnings, columns=columns)


def _table_body(head: str, header: list[str]) -> bool:
    """Is `head` a table whatever the file's name: a header of 2+ names (no numbers) over 2+ rows with as many
    fields, each a number or empty?"""
    if len(header) < 2 or any(to_float(h) is not None for h in header):
        return False
    delimiter = "\t" if "\t" in head.partition("\n")[0] and "," not in head.partition("\n")[0] else ","
    rows = [ln for ln in head.splitlines()[1:12] if ln.strip()]
    if len(rows) < 2:
        return False
    for row in rows[:-1]:  # the last line of a head may be cut
        cells = row.split(delimiter)
        if len(cells) != len(header) or any(c.strip() and to_float(c) is None for c in cells):
            return False
    return True

SPLIT_KEYS = ("type", "split", "phase", "mode", "stage", "subset")
_SPLITS = {"train": "train", "training": "train", "val": "eval", "valid": "eval", "validation": "eval", "eval": "eval",
           "evaluation": "eval", "dev": "eval", "test": "test"}


class RowSplits:
    """A long-format table's column that says which split each row measured (`step,type,loss` with `type`
    `train` or `val`): a row of an eval split has its metrics named in that split (its `loss` is the eval
    loss, not the train loss). `at` is None when the table has no such column."""

    def __init__(self, header: list[str]) -> None:
        self.at = next((i for i, h in enumerate(header) if h.strip().lower() in SPLIT_KEYS), None)
        self.header = header
        self._names: dict[tuple[int, str], str] = {}

    def renamed(self, row: list[str], values: dict[str, Any], columns: list[tuple[int, str]]) -> dict[str, Any]:
        split = _SPLITS.get(row[self.at].strip().lower()) if self.at is not None and self.at < len(row) else None
        if split is None or split == "train":
            return values
        out = {}
        for i, name in columns:
            if name in values:
                key = (i, split)
                if key not in self._names:
                    self._names[key] = metric(self.header[i], split).name
                out[self._names[key]] = values[name]
        return out


def checked_rows(path: Path, reader: Any) -> Iterator[list[str]]:
    """The rows of a `csv.reader`, with its errors (a field over the size limit, a newline inside an
    unquoted field: binary or damaged files) as an InputError naming the file and the line."""
    try:
        yield from reader
    except csv.Error as exc:
        raise InputError(path, f"malformed CSV ({exc})", line=reader.line_num) from None


def _header(line: str) -> list[str]:
    delimiter = "\t" if "\t" in line and "," not in line else ","
    return next(csv.reader(io.StringIO(line), delimiter=delimiter), [])


def _read_csv(path: Path, header: list[str], rows: Any) -> tuple[PointTable, dict[str, Any], list[str]]:
    table = PointTable()
    step_col, time_col = step_key(header), time_key(header)
    done = None
    if step_col is None:
        rows = list(rows)
        step_col = done = steps_done(header, rows)
    step_at = header.index(step_col) if step_col else None
    time_at = header.index(time_col) if time_col else None
    names = FileNames()
    splits = RowSplits(header)
    columns, skipped = _columns(header, {step_at, time_at, splits.at}, names)
    meta: dict[str, Any] = {"dialect": "wandb" if "_step" in header or "_runtime" in header else "csv",
                            "columns": header}
    if skipped:
        meta["skipped_columns"] = skipped
    if done:
        meta["notes"] = {"step": f"the step is the {done!r} column (the steps done, rising on every row)"}
    epochs: list[int | None] | None = None
    first = 0
    if step_at is None:
        rows = list(rows)
        epoch_at = next((i for i, h in enumerate(header) if h.strip().lower() in EPOCH_KEYS), None)
        epochs = _epochs([_step(row, epoch_at) if any(c.strip() for c in row) else -1 for row in rows]) \
            if epoch_at is not None else None
        counter_at = None if epochs is not None else counter_key(header)  # an RL table's `Episode` (500, 1000,
        counted = _epochs([_step(r, counter_at) if any(c.strip() for c in r) else -1 for r in rows]) \
            if counter_at is not None else None  # ..) rising on every row: the step, not a metric nor the row
        if counted is not None:
            epoch_at, epochs = counter_at, counted
        else:
            counter_at = None
        if epochs is not None:
            columns = [(i, name) for i, name in columns if i != epoch_at]
        if epochs is None:
            refuse_results_table(path, header, rows)
            refuse_settings_table(path, header)
        how = f"the {header[epoch_at]!r} column " + ("(one row an epoch)" if counter_at is None else
                                                     "(a count rising on every row)") if epochs is not None else \
            "the row index, from 0"
        if epochs is None and epoch_at is not None and _repeats([_step(row, epoch_at) for row in rows]):
            first = 1  # several rows an epoch, in order: each row one more record, numbered as a console's (1, 2, …)
            how = f"the row's number, from 1 (the {header[epoch_at]!r} column repeats: several rows an epoch)"
        meta["notes"] = {"step": f"no step column: the step is {how}"}
    warnings: list[str] = []
    for index, row in enumerate(rows):
        line = index + 2
        step = (index + first if epochs is None else epochs[index]) if step_at is None else _step(row, step_at)
        if step is None:
            if any(cell.strip() for cell in row):
                warnings.append(f"{path}:{line}: no integer step in column {step_col!r}; row left out")
            continue
        when = unix_time(row[time_at]) if time_at is not None and time_at < len(row) else None
        values = splits.renamed(row, {name: row[i] for i, name in columns if i < len(row) and row[i].strip()}, columns)
        if values:
            table.add_row(line, step, when, *scaled_row(values, names.scales))
    return table, meta, warnings


_STEPS_DONE = ("total_timesteps", "timesteps", "total_steps")


def steps_done(header: list[str], rows: list[list[str]]) -> str | None:
    """The column counting the steps done, as RL logs keep it (SB3's `time/total_timesteps`, `total timesteps`,
    `timesteps`, `total_steps`), when it is a whole number rising on every row: the axis the run is logged along.
    A total that stays put (LLaMA-Factory's planned `total_steps`) is no axis."""
    for i, column in enumerate(header):
        if column.strip().lower().replace(" ", "_").rsplit("/", 1)[-1] not in _STEPS_DONE:
            continue
        values = [_step(row, i) for row in rows if any(cell.strip() for cell in row)]
        if len(values) >= 2 and None not in values and all(b > a for a, b in zip(values, values[1:])):  # type: ignore[operator]
            return column
    return None


def refuse_results_table(path: Path, header: list[str], rows: list[list[str]]) -> None:
    """Raises InputError for a table of results, not of a run: no step column, and a first column of names that
    differ on every row (one row a model, not a logging step). Names that differ only by their numbers
    (`epoch 1`, `epoch 2`) count something; times (`2024-05-01 10:00`) stamp a series: neither is refused."""
    firsts = [row[0].strip() for row in rows if row and any(cell.strip() for cell in row)]
    if len(firsts) < 2 or len(set(firsts)) < len(firsts) or any(not f or to_float(f) is not None for f in firsts):
        return
    if len({re.sub(r"\d+", "", f) for f in firsts}) == 1 or all(unix_time(f) is not None for f in firsts):
        return
    shown = ", ".join(firsts[:3]) + (", ..." if len(firsts) > 3 else "")
    raise InputError(path, f"a table of results, one row a {header[0]!r} ({shown}), with no step, epoch or "
                           "iteration column: expected a training log, one row a logging step")


def _columns(header: list[str], taken: set[int | None], names: FileNames) -> tuple[list[tuple[int, str]], list[str]]:
    columns: list[tuple[int, str]] = []
    skipped: list[str] = []
    for i, column in enumerate(header):
        if i in taken:
            continue
        if column.endswith("__MIN") or column.endswith("__MAX") or column.startswith("_") and column not in _KNOWN:
            skipped.append(column)
            continue
        wandb = _WANDB_RUN.match(column)
        columns.append((i, names(wandb.group(1) if wandb else column, _KNOWN.get).name))
    named = rivals({header[i]: name for i, name in columns})
    return [(i, named[header[i]]) for i, _ in columns], skipped



def _repeats(epochs: list[int | None]) -> bool:
    """An epoch column of whole numbers, never going back, that repeats from row to row: several records an epoch
    (a custom CSV written every N batches), the rows in the order they were logged. Keras' CSVLogger writes one
    row an epoch (rising: `_epochs`); a table whose epochs go back is no such column."""
    seen = [e for e in epochs if e is not None]
    return len(seen) == len(epochs) > 1 and all(a <= b for a, b in zip(seen, seen[1:])) and \
        any(a == b for a, b in zip(seen, seen[1:]))


def _step(row: list[str], at: int) -> int | None:
    number = to_float(row[at]) if at < len(row) else None
    return int(number) if number is not None and number.is_integer() else None


# -- JSON lines -----------------------------------------------------------------------------------
class JSONLImporter:
    """One JSON object per line, each with a step key (`step`, `_step`, `iteration`, `num_updates` …)."""

    name = JSONL_NAME

    def sniff(self, path: Path, head: str) -> bool:
        if not is_text(head):
            return False
        lines = [ln for ln in head.splitlines()[:20] if ln.strip()]
        if not lines or not lines[0].lstrip().startswith("{"):
            return False
        first = _object(lines[0])
        return first is not None and (step_key(list(first)) is not None or len(lines) > 1 and
                                      any(to_float(v) is not None for v in first.values()))

    def read(self, path: Path) -> ImportedRun:
        with gc_paused():
            table, meta, warnings = _read_jsonl(path, read_text(path).splitlines())
            columns, rejected = table.build_columns()
        warnings += describe(rejected, lambda line: f"{path}:{line}")
        return ImportedRun(str(path), JSONL_NAME, None, meta, warnings, columns=columns)


def _object(line: str) -> dict[str, Any] | None:
    try:
        value = json.loads(line)  # the default parser: bare NaN/Infinity are fine
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _read_jsonl(path: Path, lines: list[str]) -> tuple[PointTable, dict[str, Any], list[str]]:
    table = PointTable()
    warnings: list[str] = []
    meta: dict[str, Any] = {"dialect": "jsonl"}
    names = FileNames()
    demoted: set[str] = set()  # keys that lost their name to a closer spelling (`rivals`)
    stepless: list[tuple[int, dict[str, Any]]] = []  # (line, record) of records without a step key
    rows: list[Row] = []
    fairseq: set[int] = set()  # lines whose step is fairseq's `num_updates`
    for line, text in enumerate(lines, 1):
        if not text.strip():
            continue
        record = _object(text)
        if record is None:
            warnings.append(f"{path}:{line}: not a JSON object; line left out")
            continue
        flat = summarised(_flatten(record))
        key = step_key(list(flat))
        step = _step_value(flat.pop(key)) if key else None
        if step is None:
            stepless.append((line, flat))
            continue
        if key == "num_updates":
            meta["dialect"] = "fairseq"
            fairseq.add(line)
        rows.append(Row(line, step, flat, _row_split(flat)))
    note = epoch_steps(rows)
    if note:
        meta["notes"] = {"step": note}
    kept = {k for row in rows for k, v in row.flat.items() if _is_value(v)}
    refuse_progress_only(path, len(rows), kept)  # LLaMA-Factory's predict run: `percentage` is no metric
    for row in rows:
        flat = {k: v for k, v in row.flat.items() if not is_progress(k)}
        _add_record(table, row.line, row.step, flat, names, row.line in fairseq, demoted, row.split)
    by_epoch = _epoch_records(stepless) if stepless and not len(table) else None
    if by_epoch is not None:
        meta["notes"] = {"step": "no step key: the step is the epoch (one record an epoch)"}
        for line, epoch, flat in by_epoch:
            _add_record(table, line, epoch, flat, names, False, demoted)
    elif stepless:
        warnings.append(f"{path}: {len(stepless)} lines without a step key ({', '.join(STEP_KEYS)}, bare or under "
                        f"{', '.join(_STEP_NAMESPACES)}); left out")
    return table, meta, warnings


def _row_split(flat: dict[str, Any]) -> str | None:
    """The eval split a record names itself in (`"mode": "val"`, as a long-format table's split column), else None."""
    for key, value in flat.items():
        if isinstance(value, str) and key.strip().lower() in SPLIT_KEYS:
            split = _SPLITS.get(value.strip().lower())
            return None if split == "train" else split
    return None


def _add_record(table: PointTable, line: int, step: int, flat: dict[str, Any], names: FileNames, fairseq: bool,
                demoted: set[str], split: str | None = None) -> None:
    tkey = time_key(list(flat))
    when = unix_time(flat.pop(tkey)) if tkey else None
    values = _eval_row({k: v for k, v in flat.items() if _is_value(v)}, names, fairseq, demoted, split)
    if values:
        table.add_row(line, step, when, *scaled_row(values, names.scales))


def _epoch_records(records: list[tuple[int, dict[str, Any]]]) -> list[tuple[int, int, dict[str, Any]]] | None:
    """[(line, epoch, record without its epoch)] of a file whose records carry no step key but an epoch that
    rises on every record (one record an epoch), else None."""
    out = []
    for line, flat in records:
        key = next((k for k in flat if k.strip().lower() in EPOCH_KEYS), None)
        epoch = _step_value(flat[key]) if key else None
        if epoch is None:
            return None
        out.append((line, epoch, {k: v for k, v in flat.items() if k != key}))
    epochs = [e for _, e, _ in out]
    return out if _epochs(epochs) is not None else None


def _eval_row(flat: dict[str, Any], names: FileNames, fairseq: bool, demoted: set[str],
              split: str | None = None) -> dict[str, Any]:
    """{name: value} of a row; a row with an evaluation's metrics and neither the training loss nor the LR is
    the evaluation's own record: its times are the evaluation's (mmengine's scalars.json writes `time` and
    `data_time` beside `val/loss`), not a training step's. A row that names its split (`split`) is that split's."""
    named = rivals({k: _name(names, k, fairseq) for k in flat}, demoted)
    if split or any(n.startswith("eval/") for n in named.values()) and not {LOSS, LR} & set(named.values()):
        for k in [k for k, n in named.items() if not n.startswith(f"{split or 'eval'}/")]:
            found = metric(k, split or "eval")
            named[k] = found.name
            if found.scale != 1.0:
                names.scales[found.name] = found.scale
    return {named[k]: v for k, v in flat.items()}


def _flatten(record: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in record.items():
        if is_summary(value):  # StyleGAN/EDM's `{"num", "mean", "std"}`: its mean
            out[f"{prefix}{key}"] = value["mean"]
        elif isinstance(value, dict):
            out.update(_flatten(value, f"{prefix}{key}/"))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _step_value(value: Any) -> int | None:
    number = to_float(value)
    return int(number) if number is not None and number.is_integer() else None


def _is_value(value: Any) -> bool:
    return to_float(value) is not None


def _name(names: FileNames, key: str, fairseq: bool) -> str:
    return names(key, _fairseq_name if fairseq else _KNOWN.get).name


def _fairseq_name(key: str) -> str | None:
    return _KNOWN.get(key) or fairseq_name(key)
