"""Records the general console reader could not number, read from the log's lines once more when its read found
(almost) no steps: a second look, kept only when it finds clearly more records (wild-logs-6 M3, R1).

* Metric lines of one shape repeated with an epoch but no step counter (a TF2 tutorial's `Epoch 1 Loss 4.2402 Accuracy 0.0`
  printed every batch, 703 an epoch, with an indexed `Epoch 1 Batch 500 Loss ..` every 500; a CIFAR script's
  tab-indented `\\tepoch 3: train acc: 71.0%, loss: 0.82`): each line is a record. Its step is its epoch when
  the epoch moves on every line (one record an epoch), else its place in the file (1, 2, 3 ..), as the general
  reader numbers counterless records. Leading whitespace is no reason to leave a line out.
* Blocks whose counter is a line of its own (Decision Transformer's `num of updates: 1000` then `ret loss: 3.3`,
  `action loss: 0.26` .. between `=====` rules; PointNet's `-----0------` then `train_mean loss: 2.52`): a rule
  or a line carrying only a counter heads a record, and the `key: value` lines up to the next head are its values.

The general reader keeps what it read when this finds no more than twice its steps: a log it reads is not read
again unless it read fewer than `FEW` steps, and never one over `MAX_BYTES`.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from stethoscope.importers.base import ImportedRun
from stethoscope.importers.source import read_text
from stethoscope.logtext.console_line import ANSI, parse
from stethoscope.logtext.console_names import resolve
from stethoscope.logtext.table import Layout, PointTable, describe
from stethoscope.records import LOSS

FEW = 64  # a console read of fewer distinct steps than this may have missed the log's records
MAX_BYTES = 32 * 1024 * 1024
MIN_RECORDS = 3
_RULE = re.compile(r"^[-=*#~_+]{3,}\s*(?:(\d+)\s*[-=*#~_+]{3,})?$")  # `=====`, `-----0------`
_COUNTER_KEY = re.compile(r"(?i)(?:^|[\s_])(?:updates?|steps?|iters?|iterations?|epochs?|batch(?:es)?|rounds?|"
                          r"episodes?)$")
_EPOCH = "train/epoch"

Record = tuple[int, int, dict[str, tuple[float, str]]]  # (line, step, {name: (scale, text)})


def second_look(path: Path, run: ImportedRun) -> ImportedRun:
    """`run` (the general reader's read of `path`), or the log's records read as repeated lines or as blocks
    when that finds more than twice the steps `run` holds."""
    steps = _distinct_steps(run.columns)
    if steps >= FEW or not _small(path):
        return run
    lines = [(number, _parsed(text)) for number, text in enumerate(read_text(path).splitlines(), 1) if text.strip()]
    best, note = None, ""
    for found, how in ((_blocks(lines), _BLOCKS), (_repeated(lines), _REPEATED)):
        if len(found) >= MIN_RECORDS and len(found) > 2 * steps and (best is None or len(found) > len(best)):
            best, note = found, how
    if best is None:
        return run
    table = PointTable()
    for number, step, values in best:
        names = tuple(values)
        table.add_row(number, step, None, Layout(names, tuple(values[n][0] for n in names)),
                      tuple(values[n][1] for n in names))
    columns, rejected = table.build_columns()
    meta = {k: v for k, v in run.meta.items() if k != "closest"}
    meta["notes"] = {**meta.get("notes", {}), "step": note.format(count=len(best))}
    warnings = [w for w in run.warnings if "carry no step counter" not in w]
    warnings += describe(rejected, lambda line: f"{path}:{line}")
    return ImportedRun(run.path, run.format, None, meta, warnings, run.lines, columns=columns)


def _distinct_steps(columns: Any) -> int:
    steps = columns.step_array if hasattr(columns, "step_array") else columns.steps
    return len(set(steps[: 4 * FEW * 32].tolist() if hasattr(steps, "tolist") else steps[: 4 * FEW * 32]))


def _small(path: Path) -> bool:
    try:
        return path.stat().st_size <= MAX_BYTES
    except OSError:
        return False


def _parsed(text: str) -> tuple[str, Any, dict[str, tuple[float, str]]]:
    """(stripped text, parsed line, {name: (scale, value text)} of its metrics)."""
    clean = (ANSI.sub("", text) if "\x1b" in text else text).strip()
    line = parse(clean)
    cache: dict[Any, Any] = {}
    values: dict[str, tuple[float, str]] = {}
    for v in line.values:
        found = resolve(cache, v.key, v.unit, line.eval)
        if found is not None and found[0] not in values and not _clock(clean, v.key):
            values[found[0]] = (found[1], v.text.replace(",", ""))
    return clean, line, values


def _clock(clean: str, key: str) -> bool:
    """Whether `key`'s value is a clock (`time elapsed: 0:01:07`: the parser reads its hours alone)."""
    return re.search(re.escape(key) + r"\W{0,3}\d+:\d\d", clean) is not None


def _repeated(lines: list[tuple[int, Any]]) -> list[Record]:
    """Each line of the commonest shape of metric lines that print the train loss and an epoch but no step counter,
    as a record (lines with no count at all stay refused: nothing says they are a training's steps)."""
    shapes: Counter[tuple[str, ...]] = Counter()
    for _, (_, line, values) in lines:
        if line.step is None and not line.progress and not line.eval and LOSS in values and _EPOCH in values:
            shapes[tuple(values)] += 1
    if not shapes:
        return []
    shape = shapes.most_common(1)[0][0]
    rows = [(number, values) for number, (_, line, values) in lines
            if line.step is None and not line.progress and not line.eval and tuple(values) == shape]
    epochs = [_whole(values[_EPOCH][1]) for _, values in rows]
    if None in epochs or any(b < a for a, b in zip(epochs, epochs[1:])):  # type: ignore[operator]
        return []  # the epoch goes back: runs one after the other, not one run's records
    by_epoch = all(b > a for a, b in zip(epochs, epochs[1:]))  # type: ignore[operator]
    return [(number, epochs[k] if by_epoch else k + 1, values) for k, (number, values) in  # type: ignore[misc]
            enumerate(rows)]


def _blocks(lines: list[tuple[int, Any]]) -> list[Record]:
    """Records headed by a rule or a counter line, their values the metric lines up to the next head."""
    out: list[Record] = []
    step: int | None = None
    first, values = 0, {}
    for number, (clean, line, found) in lines:
        rule = _RULE.match(clean)
        counter = None if rule else _counter(line, found)
        if rule or counter is not None and step is not None and values:
            if step is not None and values:
                out.append((first, step, values))
            step, first, values = None, number, {}
            if rule and rule.group(1):
                step = int(rule.group(1))
        if counter is not None:
            step, first = counter, number
        elif found and line.step is None and not rule:
            for name, value in found.items():
                values.setdefault(name, value)
    if step is not None and values:
        out.append((first, step, values))
    ordered = sum(b[1] > a[1] for a, b in zip(out, out[1:]))
    return out if ordered >= 0.9 * (len(out) - 1) else []


def _counter(line: Any, found: dict[str, tuple[float, str]]) -> int | None:
    """The count of a line that carries only a counter (`num of updates: 1000`, `Epoch 3`), else None."""
    if line.step is not None:
        return line.step if not found or set(found) == {_EPOCH} else None
    if len(line.values) != 1 or not _COUNTER_KEY.search(line.values[0].key.strip()):
        return None
    return _whole(line.values[0].text)


def _whole(text: str) -> int | None:
    try:
        number = float(text.replace(",", ""))
    except ValueError:
        return None
    return int(number) if number.is_integer() else None


_REPEATED = ("{count} metric lines of one shape carry no step counter: each is a record, its step its epoch when "
             "the epoch moves on every line, else its place in the file (1, 2, 3 ..)")
_BLOCKS = ("{count} records of several lines: a rule or a line with only a counter heads each, its values the "
           "lines up to the next head")
