"""Hugging Face Trainer `trainer_state.json`, and its `log_history` dumped alone as a JSON list.

`log_history` rows become points at their own `step` (the Trainer counts from 1); run summaries
(`train_runtime`, `train_loss`, …: the last row of each `train()` call) and the Trainer's bookkeeping
go into meta. Rows of a resumed run repeat steps; all are kept, in file order. Python's json writes
bare NaN/Infinity, which `json.loads` accepts (never parse this file strictly); orjson, ~3x faster,
refuses them, so it reads the file first and json only where it refused (integers beyond 64 bits,
which no Trainer writes, are the one value orjson reads differently: as floats).

A million rows: same-keyed spans of rows (the training rows between two evals) go to columns in
C-level passes; the per-row rules (eval rows repeating the epoch, rows without a step, summaries)
run row by row only where they can apply. A big file whose history is flat numbers (with pyarrow
installed) skips the dicts: pyarrow reads the history as columns (`hf_arrow.py`), and only the rows the
per-row rules apply to are parsed as dicts.
"""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Iterable, Sequence
from itertools import chain, compress, repeat
from operator import eq, itemgetter, ne
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stethoscope.errors import InputError
from stethoscope.importers import hf_arrow
from stethoscope.importers.base import Columns, ImportedRun
from stethoscope.logtext.names import metric_name
from stethoscope.importers.source import is_text, log_name, read_bytes
from stethoscope.logtext.table import Layout, PointTable, Rejected, describe, gc_paused
from stethoscope.records import json_safe

if TYPE_CHECKING:
    from stethoscope.logtext.coded import CodedColumns, RowBlock

try:
    import orjson
except ImportError:  # a core dependency, but a broken wheel must not stop diagnosis: json reads it all
    orjson = None

NAME = "hf_trainer_state"
_META_KEYS = ("global_step", "max_steps", "num_train_epochs", "epoch", "train_batch_size", "logging_steps",
              "eval_steps", "save_steps", "best_metric", "best_global_step", "best_model_checkpoint",
              "total_flos", "num_input_tokens_seen", "stateful_callbacks")
# What marks the summary row that `Trainer.train()` appends (a custom per-step `train_loss` does not).
_SUMMARY_KEYS = frozenset(("train_runtime", "train_samples_per_second", "train_steps_per_second"))
_SUMMARY: Any = ("summary",)
_NUMBER_TYPES = frozenset((float, int))
_EMPTY: Any = ("empty",)
_ARGS_FILES = ("training_args.json", "trainer_config.json", "args.json", "config.json")
_GA = "gradient_accumulation_steps"
# training_args.bin is a pickle: we never unpickle it; its integer field is read from the raw bytes.
_GA_PICKLED = re.compile(rb"gradient_accumulation_steps(?:q.|r....|\x94)?(?:K(.)|M(..)|J(....))", re.DOTALL)


# a list whose first row is the Trainer's: a loss (or an eval's) first, then its `epoch` and `step` within the row
_HISTORY_LIST = re.compile(r'\s*\[\s*\{\s*"(?:loss|eval_loss|train_loss)"\s*:[^{}]*"epoch"\s*:[^{}]*"step"\s*:\s*\d+')


class HFTrainerStateImporter:
    """HF Trainer `trainer_state.json` files (also under another name, when they hold `log_history`)."""

    name = NAME

    def sniff(self, path: Path, head: str) -> bool:
        if not is_text(head):
            return False
        if _HISTORY_LIST.match(head):  # `log_history` alone, dumped as a JSON list (`json.dump(state.log_history)`)
            return True
        if not head.lstrip().startswith("{"):
            return False
        return log_name(path) == "trainer_state.json" or '"log_history"' in head

    def read(self, path: Path) -> ImportedRun:
        # The row dicts are built and freed while the GC is paused: freed after it, the first collection
        # would walk every one of them (~0.3 s a million rows).
        with gc_paused():
            data = read_bytes(path)
            columnar = hf_arrow.split(data)
            if columnar is not None:
                (state, history), problem = columnar, None
                reader = _history_rows(path, history)
            else:
                state, problem = _load(path, data)
                rows = state.pop("log_history", None)
                if not isinstance(rows, list):
                    raise InputError(path, "no `log_history` list: not a Trainer state file")
                reader = _rows(path, rows)
                del rows
        warnings = ([problem] if problem else []) + reader.warnings
        warnings += describe(reader.run.rejected, lambda index: f"{path}: log_history[{index}]")
        meta = _meta(path, state, reader.summaries)
        if reader.unstepped:
            meta["notes"] = {"rows_without_step": f"{reader.unstepped} log_history rows without `step` (e.g. "
                                                  "predict() metrics) were put at the step logged before them"}
        return ImportedRun(str(path), NAME, None, meta, warnings, columns=reader.run.columns)


def _load(path: Path, data: bytes) -> tuple[dict[str, Any], str | None]:
    """The state, and a warning when it had to be salvaged from a truncated or damaged file."""
    state = _fast_loads(data)
    if state is None:
        return _strict_load(path, data.decode("utf-8", errors="replace"))
    if isinstance(state, list):  # the history alone: its rows, each a Trainer's log (`_HISTORY_LIST`)
        return {"log_history": state}, None
    if not isinstance(state, dict):
        raise InputError(path, "expected a JSON object at the top")
    return state, None


def _fast_loads(data: bytes) -> Any:
    """orjson's parse (~3x faster than json's), or None where it refuses the file: bare NaN/Infinity
    (which Python's json writes), invalid UTF-8, damage. json then reads it, as slowly as ever."""
    if orjson is None:
        return None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None


def _strict_load(path: Path, text: str) -> tuple[dict[str, Any], str | None]:
    try:
        state = json.loads(text)  # the default parser: accepts NaN, Infinity, -Infinity
    except json.JSONDecodeError as exc:
        rows = _salvage(text)
        if rows is None:
            raise InputError(path, f"not valid JSON ({exc.msg}, column {exc.colno})", line=exc.lineno) from None
        return {"log_history": rows}, (f"{path}:{exc.lineno}: truncated or damaged JSON ({exc.msg}); read the "
                                       f"{len(rows)} complete log_history rows before it")
    if isinstance(state, list):  # the history alone: its rows, each a Trainer's log (`_HISTORY_LIST`)
        return {"log_history": state}, None
    if not isinstance(state, dict):
        raise InputError(path, "expected a JSON object at the top")
    return state, None


def _salvage(text: str) -> list[Any] | None:
    """The complete rows of `log_history` in a file cut short (a job killed while saving), or None."""
    start = text.find('"log_history"')
    start = text.find("[", start) if start >= 0 else -1
    if start < 0:
        return None
    decoder = json.JSONDecoder()
    rows: list[Any] = []
    at = start + 1
    while True:
        at = _skip(text, at)
        if at >= len(text) or text[at] != "{":
            return rows
        try:
            row, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            return rows
        rows.append(row)


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n,":
        at += 1
    return at


def _rows(path: Path, rows: list[Any]) -> _Rows:
    reader = _Rows(path)
    spans = _same_keys(rows)
    for start, stop in spans:
        if not reader.block(rows, start, stop):
            reader.each(rows, start, stop)
    if not spans:
        reader.each(rows, 0, len(rows))
    reader.run.flush()
    return reader


def _history_rows(path: Path, history: hf_arrow.History) -> _Rows:
    """`_rows` for a history pyarrow read as columns: spans of rows with the same keys as columns where
    `block` would take them, the rest as the dicts orjson makes of their text."""
    reader = _Rows(path)
    for start, stop, keys in history.spans():
        if not reader.columns(history, start, stop, keys):
            for index, row in enumerate(history.dicts(start, stop), start):
                reader.row(index, row)
    reader.run.flush()
    return reader


def _same_keys(rows: list[Any]) -> list[tuple[int, int]]:
    """Spans of consecutive rows with the same keys in the same order (a Trainer logs thousands of
    same-keyed training rows between evals), found with C-level passes; none when a row is not an object."""
    if set(map(type, rows)) != {dict}:
        return []
    keys = list(map(tuple, rows))
    cuts = [0, *compress(range(1, len(keys)), map(ne, keys[1:], keys[:-1])), len(keys)]
    return list(zip(cuts[:-1], cuts[1:]))


class _Rows:
    """Reads log_history rows: `block` takes a span of same-keyed rows at once where that cannot change
    the outcome, `each` reads rows one by one (the rules live there)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.run = _Run()
        self.summaries: list[dict[str, Any]] = []
        self.warnings: list[str] = []
        self.shapes: dict[tuple[str, ...], Any] = {}
        self.prev_step: Any = None
        self.prev_epoch: Any = None
        self.unstepped = 0

    def block(self, rows: list[Any], start: int, stop: int) -> bool:
        """False when a row of the span needs `each`: a step that is not an int, a repeated step (an eval
        row's epoch rule), or a span of one row (nothing to gain)."""
        span = rows[start:stop]
        steps = list(map(dict.get, span, repeat("step")))
        if len(span) < 2 or set(map(type, steps)) != {int} or any(map(eq, steps[1:], steps[:-1])):
            return False
        if steps[0] == self.prev_step:
            return False
        keys = tuple(span[0])
        shape = self.shapes.get(keys) or self.shapes.setdefault(keys, _shape(keys))
        if shape is _SUMMARY:
            self.summaries += span
            return True
        self.prev_step, self.prev_epoch = steps[-1], span[-1].get("epoch")
        if shape is not _EMPTY:
            self.run.extend(shape, range(start, stop), steps, list(map(shape[1], span)))
        return True

    def columns(self, history: hf_arrow.History, start: int, stop: int, keys: tuple[str, ...]) -> bool:
        """`block` for a span of a columnar history: the same conditions, the values as arrays."""
        from stethoscope.logtext.coded import RowBlock

        steps = history.steps[start:stop]
        if stop - start < 2 or "step" not in keys or bool((steps[1:] == steps[:-1]).any()):
            return False
        if int(steps[0]) == self.prev_step:
            return False
        shape = self.shapes.get(keys) or self.shapes.setdefault(keys, _shape(keys))
        if shape is _SUMMARY:
            return False  # one row per train() call: read as a dict
        self.prev_step = int(steps[-1])
        self.prev_epoch = float(history.values["epoch"][stop - 1]) if "epoch" in keys else None
        if shape is not _EMPTY:
            self.run.add(RowBlock(shape[0].names, steps, [history.values[k][start:stop] for k in shape[2]], None))
        return True

    def each(self, rows: list[Any], start: int, stop: int) -> None:
        for index in range(start, stop):
            self.row(index, rows[index])

    def row(self, index: int, row: Any) -> None:
        step = row.get("step") if type(row) is dict else None
        if type(step) is not int:
            if self.prev_step is None or type(row) is not dict:
                self.warnings.append(f"{self.path}: log_history[{index}] is not an object with an integer "
                                     "`step`; left out")
                return
            step, row, self.unstepped = self.prev_step, {**row, "step": self.prev_step}, self.unstepped + 1
        keys = tuple(row)
        shape = self.shapes.get(keys) or self.shapes.setdefault(keys, _shape(keys))
        if shape is _SUMMARY:
            self.summaries.append(row)
            return
        epoch = row.get("epoch")
        if step == self.prev_step and epoch == self.prev_epoch and epoch is not None:
            shape = _without_epoch(self.shapes, keys)  # an eval row repeats the epoch of the row before it
        self.prev_step, self.prev_epoch = step, epoch
        if shape is not _EMPTY:
            self.run.extend(shape, (index,), (step,), (shape[1](row),))


class _Run:
    """Consecutive rows of one shape, turned into columns as one block (the common case: every
    training row has the same keys)."""

    def __init__(self) -> None:
        self.parts: list[Columns | CodedColumns | RowBlock] = []
        self.rejected: list[Rejected] = []
        self.shape: Any = None
        self.spans: list[tuple[Iterable[int], Sequence[int], Sequence[Any]]] = []  # (origins, steps, values)

    @property
    def columns(self) -> Columns | CodedColumns:
        # numpy: loaded when a log is read, not when the package is imported
        from stethoscope.logtext.coded import join

        return join(self.parts)

    def extend(self, shape: Any, origins: Iterable[int], steps: Sequence[int], values: Sequence[Any]) -> None:
        if shape is not self.shape:
            self.flush()
            self.shape = shape
        self.spans.append((origins, steps, values))

    def add(self, block: RowBlock) -> None:
        """Rows already laid out as columns, after those before them."""
        self.flush()
        self.shape = None
        self.parts.append(block)

    def flush(self) -> None:
        if not self.spans:
            return
        steps, values = self._joined(1), self._joined(2)
        block = _coded(self.shape[0], steps, values) or _numbers(self.shape[0], steps, values)
        if block is None:  # a value is not a number: the table leaves it out and names it
            table = PointTable()
            table.add_columns(self.shape[0], self._joined(0), steps, values)
            block, rejected = table.build_columns()
            self.rejected += rejected
        self.parts.append(block)
        self.spans = []

    def _joined(self, at: int) -> list[Any]:
        # One span (a whole training run between evals) is used as it is: no copy of a million items.
        if len(self.spans) == 1:
            span = self.spans[0][at]
            return span if type(span) is list else list(span)
        return list(chain.from_iterable(map(itemgetter(at), self.spans)))


def _coded(layout: Layout, steps: list[int], values: list[Any]) -> CodedColumns | None:
    """The rows as arrays when every value is a float or an int and every step fits in 64 bits (numpy
    converts an int as float() does); None otherwise, for `_numbers` and the table to decide."""
    import numpy as np

    from stethoscope.logtext.coded import CodedColumns

    floats = list(chain.from_iterable(values))
    if not set(map(type, floats)) <= _NUMBER_TYPES:
        return None
    try:
        step_array = np.array(steps, dtype=np.int64)
    except OverflowError:
        return None
    return CodedColumns.of_rows(layout.names, step_array, np.array(floats, dtype=np.float64).reshape(len(steps), -1))


def _numbers(layout: Layout, steps: list[int], values: list[Any]) -> Columns | None:
    """The rows as columns when every value is a number: what PointTable builds, in a few C-level
    passes instead of its per-chunk ones (4M points in ~0.2 s); None otherwise."""
    floats = list(chain.from_iterable(values))
    if set(map(type, floats)) != {float}:  # float() of a float is itself: converted only when needed
        try:
            floats = list(map(float, floats))
        except (TypeError, ValueError):
            return None
    width = len(layout.names)
    repeated: list[int] = [0] * len(floats)
    for at in range(width):
        repeated[at::width] = steps  # the same int objects, placed by C-level slice copies
    return Columns(list(layout.names) * len(steps), repeated, floats, [None] * len(floats))


def _shape(keys: tuple[str, ...], skip: str = "step") -> Any:
    """(layout, reader of the values, the keys it reads) for rows with these keys; _SUMMARY for a run summary row;
    _EMPTY when nothing is left to read."""
    if _SUMMARY_KEYS.intersection(keys):
        return _SUMMARY
    fields = tuple(sorted(k for k in keys if k not in ("step", skip)))  # as the Trainer writes them (sort_keys)
    if not fields:
        return _EMPTY
    values = itemgetter(*fields) if len(fields) > 1 else (lambda row, k=fields[0]: (row[k],))
    return Layout(tuple(metric_name(k) for k in fields)), values, fields


def _without_epoch(shapes: dict[tuple[str, ...], Any], keys: tuple[str, ...]) -> Any:
    key = keys + ("~without epoch",)
    if key not in shapes:
        shapes[key] = _shape(keys, skip="epoch")
    return shapes[key]


def _meta(path: Path, state: dict[str, Any], summaries: list[dict[str, Any]]) -> dict[str, Any]:
    meta: dict[str, Any] = {k: state[k] for k in _META_KEYS if k in state}
    if summaries:
        meta["summary"] = summaries[-1]
        if len(summaries) > 1:
            meta["summaries"] = summaries
    ga = gradient_accumulation(path.parent)
    if ga is not None:
        meta[_GA] = ga
    return json_safe(meta)


def gradient_accumulation(folder: Path) -> int | None:
    """`gradient_accumulation_steps` from the training arguments saved beside a trainer_state.json."""
    for name in _ARGS_FILES:
        value = _from_json(folder / name)
        if value is not None:
            return value
    return _from_pickle(folder / "training_args.bin")


def _from_json(path: Path) -> int | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    value = data.get(_GA) if isinstance(data, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _from_pickle(path: Path) -> int | None:
    try:
        raw = path.read_bytes()
        if zipfile.is_zipfile(path):  # torch.save's zip format: the pickle is archive/data.pkl
            with zipfile.ZipFile(path) as archive:
                raw = b"".join(archive.read(n) for n in archive.namelist() if n.endswith("data.pkl"))
    except (OSError, zipfile.BadZipFile):
        return None
    m = _GA_PICKLED.search(raw)
    if m is None:
        return None
    data = next(g for g in m.groups() if g is not None)
    return int.from_bytes(data, "little", signed=len(data) == 4)
