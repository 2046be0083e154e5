"""Hugging Face Trainer `trainer_state.json`.

`log_history` rows become points at their own `step` (the Trainer counts from 1); run summaries
(`train_runtime`, `train_loss`, …: the last row of each `train()` call) and the Trainer's bookkeeping
go into meta. Rows of a resumed run repeat steps; all are kept, in file order. Python's json writes
bare NaN/Infinity, which `json.loads` accepts (never parse this file strictly).
"""

from __future__ import annotations

import json
import re
import zipfile
from operator import itemgetter
from pathlib import Path
from typing import Any

from stethoscope.errors import InputError
from stethoscope.importers.base import ImportedRun
from stethoscope.importers.names import metric_name
from stethoscope.importers.source import is_text, log_name, read_text
from stethoscope.importers.table import Layout, PointTable, describe, gc_paused
from stethoscope.records import json_safe

NAME = "hf_trainer_state"
_META_KEYS = ("global_step", "max_steps", "num_train_epochs", "epoch", "train_batch_size", "logging_steps",
              "eval_steps", "save_steps", "best_metric", "best_global_step", "best_model_checkpoint",
              "total_flos", "num_input_tokens_seen", "stateful_callbacks")
# What marks the summary row that `Trainer.train()` appends (a custom per-step `train_loss` does not).
_SUMMARY_KEYS = frozenset(("train_runtime", "train_samples_per_second", "train_steps_per_second"))
_SUMMARY: Any = ("summary",)
_EMPTY: Any = ("empty",)
_ARGS_FILES = ("training_args.json", "trainer_config.json", "args.json", "config.json")
_GA = "gradient_accumulation_steps"
# training_args.bin is a pickle: we never unpickle it; its integer field is read from the raw bytes.
_GA_PICKLED = re.compile(rb"gradient_accumulation_steps(?:q.|r....|\x94)?(?:K(.)|M(..)|J(....))", re.DOTALL)


class HFTrainerStateImporter:
    """HF Trainer `trainer_state.json` files (also under another name, when they hold `log_history`)."""

    name = NAME

    def sniff(self, path: Path, head: str) -> bool:
        if not is_text(head) or not head.lstrip().startswith("{"):
            return False
        return log_name(path) == "trainer_state.json" or '"log_history"' in head

    def read(self, path: Path) -> ImportedRun:
        with gc_paused():
            state, problem = _load(path)
            rows = state.get("log_history")
            if not isinstance(rows, list):
                raise InputError(path, "no `log_history` list: not a Trainer state file")
            table, summaries, warnings, unstepped = _rows(path, rows)
            warnings[:0] = [problem] if problem else []
            columns, rejected = table.build_columns()
        warnings += describe(rejected, lambda index: f"{path}: log_history[{index}]")
        meta = _meta(path, state, summaries)
        if unstepped:
            meta["notes"] = {"rows_without_step": f"{unstepped} log_history rows without `step` (e.g. predict() "
                                                  "metrics) were put at the step logged before them"}
        return ImportedRun(str(path), NAME, None, meta, warnings, columns=columns)


def _load(path: Path) -> tuple[dict[str, Any], str | None]:
    """The state, and a warning when it had to be salvaged from a truncated or damaged file."""
    text = read_text(path)
    try:
        state = json.loads(text)  # the default parser: accepts NaN, Infinity, -Infinity
    except json.JSONDecodeError as exc:
        rows = _salvage(text)
        if rows is None:
            raise InputError(path, f"not valid JSON ({exc.msg}, column {exc.colno})", line=exc.lineno) from None
        return {"log_history": rows}, (f"{path}:{exc.lineno}: truncated or damaged JSON ({exc.msg}); read the "
                                       f"{len(rows)} complete log_history rows before it")
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


def _rows(path: Path, rows: list[Any]) -> tuple[PointTable, list[dict[str, Any]], list[str], int]:
    table = PointTable()
    run = _Run(table)
    summaries: list[dict[str, Any]] = []
    warnings: list[str] = []
    shapes: dict[tuple[str, ...], Any] = {}
    prev_step = prev_epoch = None
    unstepped = 0
    for index, row in enumerate(rows):
        step = row.get("step") if type(row) is dict else None
        if type(step) is not int:
            if prev_step is None or type(row) is not dict:
                warnings.append(f"{path}: log_history[{index}] is not an object with an integer `step`; left out")
                continue
            step, row, unstepped = prev_step, {**row, "step": prev_step}, unstepped + 1
        keys = tuple(row)
        shape = shapes.get(keys) or shapes.setdefault(keys, _shape(keys))
        if shape is _SUMMARY:
            summaries.append(row)
            continue
        epoch = row.get("epoch")
        if step == prev_step and epoch == prev_epoch and epoch is not None:
            shape = _without_epoch(shapes, keys)  # an eval row repeats the epoch of the row before it
        prev_step, prev_epoch = step, epoch
        if shape is not _EMPTY:
            run.add(index, step, shape, row)
    run.flush()
    return table, summaries, warnings, unstepped


class _Run:
    """Consecutive rows of one shape, handed to the table as one block (the common case: every
    training row has the same keys)."""

    def __init__(self, table: PointTable) -> None:
        self.table = table
        self.shape: Any = None
        self.origins: list[int] = []
        self.steps: list[int] = []
        self.values: list[Any] = []

    def add(self, index: int, step: int, shape: Any, row: dict[str, Any]) -> None:
        if shape is not self.shape:
            self.flush()
            self.shape = shape
        self.origins.append(index)
        self.steps.append(step)
        self.values.append(shape[1](row))

    def flush(self) -> None:
        if self.origins:
            self.table.add_columns(self.shape[0], self.origins, self.steps, self.values)
            self.origins, self.steps, self.values = [], [], []


def _shape(keys: tuple[str, ...], skip: str = "step") -> Any:
    """(layout, reader of the values) for rows with these keys; _SUMMARY for a run summary row;
    _EMPTY when nothing is left to read."""
    if _SUMMARY_KEYS.intersection(keys):
        return _SUMMARY
    fields = tuple(k for k in keys if k not in ("step", skip))
    if not fields:
        return _EMPTY
    values = itemgetter(*fields) if len(fields) > 1 else (lambda row, k=fields[0]: (row[k],))
    return Layout(tuple(metric_name(k) for k in fields)), values


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
