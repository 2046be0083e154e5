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
_WORD = re.compile(r"[A-Za-z]{2,}")
_EVAL = "eval/"
_HELD_OUT_WORD = re.compile(r"(?i)\b(?:validation|valid|val|eval|evaluation|test|testing)\b")

Record = tuple[int, int, dict[str, tuple[float, str]]]  # (line, step, {name: (scale, text)})


def second_look(path: Path, run: ImportedRun) -> ImportedRun:
    """`run` (the general reader's read of `path`), or the log's records read as repeated lines or as blocks
    when that finds more than twice the steps `run` holds."""
    steps = _distinct_steps(run.columns)
    if steps >= FEW or not _small(path):
        return run
    lines = [(number, _parsed(text)) for number, text in enumerate(read_text(path).splitlines(), 1) if text.strip()]
    best, note, count = None, "", 0
    for found, how in ((_blocks(lines), _BLOCKS), (_repeated(lines), _REPEATED)):
        records = len({(number, step) for number, step, values in found if LOSS in values or how == _BLOCKS})
        better = records > 2 * steps or how == _REPEATED and records >= steps / 2 and _sampled(lines) and \
            _left_out(run, found)
        if records >= MIN_RECORDS and better and records > count:
            best, note, count = found, how, records
    if best is None:
        return run
    table = PointTable()
    for number, step, values in best:
        names = tuple(values)
        table.add_row(number, step, None, Layout(names, tuple(values[n][0] for n in names)),
                      tuple(values[n][1] for n in names))
    columns, rejected = table.build_columns()
    meta = {k: v for k, v in run.meta.items() if k != "closest"}
    meta["notes"] = {**meta.get("notes", {}), "step": note.format(count=count)}
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
    """(stripped text, parsed line, {name: (scale, value text)} of its metrics). A line with no counter that names
    a held-out split outside its keys (`Epoch 1 Validation - Loss: 18.49, Mod Acc: 0.0`) is the eval's: its
    values are named in the eval split (a line whose keys name both splits keeps them)."""
    clean = (ANSI.sub("", text) if "\x1b" in text else text).strip()
    line = parse(clean)
    values = _named(clean, line, line.eval)
    if line.step is None and not line.eval and LOSS in values and _HELD_OUT_WORD.search(clean):
        if not any(name.startswith(_EVAL) for name in values):
            line.eval = True
            values = _named(clean, line, True)
    return clean, line, values


def _named(clean: str, line: Any, eval_line: bool) -> dict[str, tuple[float, str]]:
    cache: dict[Any, Any] = {}
    values: dict[str, tuple[float, str]] = {}
    for v in line.values:
        found = resolve(cache, v.key, v.unit, eval_line)
        if found is not None and "|" not in found[0] and found[0] not in values and not _clock(clean, v.key):
            values[found[0]] = (found[1], v.text.replace(",", ""))  # (`perf/time_s|time (s)`: a time the general
    return values  # reader names later, `times_named`; left out)


def _clock(clean: str, key: str) -> bool:
    """Whether `key`'s value is a clock (`time elapsed: 0:01:07`: the parser reads its hours alone)."""
    return re.search(re.escape(key) + r"\W{0,3}\d+:\d\d", clean) is not None


def _repeated(lines: list[tuple[int, Any]]) -> list[Record]:
    """Each line of the commonest shape of metric lines that print the train loss and an epoch but no step counter,
    as a record (lines with no count at all stay refused: nothing says they are a training's steps); an eval
    line after one is the eval's record at its step."""
    shapes: Counter[tuple[str, ...]] = Counter()
    for _, (_, line, values) in lines:
        if _counterless(line) and not line.eval and LOSS in values and _EPOCH in values:
            shapes[tuple(values)] += 1
    if not shapes:
        return []
    shape = shapes.most_common(1)[0][0]
    rows = [(number, values) for number, (_, line, values) in lines
            if _counterless(line) and not line.eval and tuple(values) == shape]
    epochs = [_whole(values[_EPOCH][1]) for _, values in rows]
    if None in epochs:
        return []
    by_epoch = all(a != b for a, b in zip(epochs, epochs[1:]))  # one record an epoch (another run may follow)
    steps = dict(zip((number for number, _ in rows), epochs if by_epoch else range(1, len(rows) + 1)))
    out: list[Record] = []
    step = None
    for number, (_, line, values) in lines:
        if number in steps:
            step = steps[number]
            out.append((number, step, values))
        elif step is not None and _counterless(line) and line.eval and values:
            out.append((number, step, values))
    return out


def _counterless(line: Any) -> bool:
    return line.step is None and not line.progress


def _sampled(lines: list[tuple[int, Any]]) -> bool:
    """Whether the lines with a counter and a train loss all print the same count (`Epoch 3, Batch 0/8, Loss:
    2.55`): one batch an epoch, a sample of it beside the epoch's own line (`Epoch 3 Training - Loss: 1.21`),
    which is the train loss."""
    counts = {line.step for _, (_, line, values) in lines if line.step is not None and LOSS in values}
    return len(counts) == 1 and sum(line.step is not None and LOSS in values for _, (_, line, values) in lines) >= \
        MIN_RECORDS


def _left_out(run: ImportedRun, found: list[Record]) -> bool:
    """Whether the general read left out most of `found`'s train losses (read other lines' instead)."""
    columns = run.columns
    names = [columns.labels[c] for c in columns.codes.tolist()] if hasattr(columns, "labels") else columns.names
    values = columns.value_array.tolist() if hasattr(columns, "value_array") else columns.values
    read = {round(v, 6) for n, v in zip(names, values) if n == LOSS}
    losses = [_number(values[LOSS][1]) for _, _, values in found if LOSS in values]
    return sum(round(x, 6) in read for x in losses if x is not None) < len(losses) / 2


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


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
    shapes = Counter(frozenset(values) for _, _, values in out)
    alike = bool(shapes) and shapes.most_common(1)[0][1] >= 0.6 * len(out)  # one record's names, block after block
    losses = sum(any("loss" in name for name in values) for _, _, values in out)
    return out if ordered >= 0.9 * (len(out) - 1) and alike and losses >= len(out) / 2 else []


def _counter(line: Any, found: dict[str, tuple[float, str]]) -> int | None:
    """The count of a line that carries only a counter (`num of updates: 1000`, `Epoch 3`), else None."""
    if line.step is not None:  # a line of a counter alone (`Epoch 3`), not a message about a step (`Iter 151: Saved
        alone = len(_WORD.findall(line.body)) <= 3  # adapter weights to ..`)
        return line.step if alone and (not found or set(found) == {_EPOCH}) else None
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
