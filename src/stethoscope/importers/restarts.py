"""Several runs written one after the other into one file (a notebook's console with `model.fit` called for
each of five models, a sweep's long-format table), told from a resume.

A resume goes back to a checkpoint's step and its loss goes on from where that checkpoint left it. Another run
starts its counter over from the beginning (its first record within one logging interval of zero) with an
untrained model: its first loss is nearer where the run before it started than where that run ended. Each such
run is a run of its own (`path#run k`), diagnosed on its own, as each run of a W&B export or an MLflow store
is; merged, a second run's start read as a loss spike and the runs' curves as one. A counter that starts over
with the loss going on from where it was is left alone (a resume from the start, or an epoch's batch count
read as the step): one run, as before, unless the log marks a new run at each such start (`marked`): a fold's
heading (a cross-validation trains each fold anew: XGBoost's `Fold 2` then `[1] train-auc:..`), or an epoch
count whose total changed (`Epoch: 12/50` then `Epoch: 0/20`: a second run, even one that goes on from the
first's weights). Marked runs are split whatever their metric (AUC alone), never laid over each other by step.
"""

from __future__ import annotations

import re
from itertools import groupby
from pathlib import Path
from statistics import median
from typing import Any

from stethoscope.errors import InputError
from stethoscope.importers import epoch_ends
from stethoscope.importers.base import ImportedRun
from stethoscope.records import LOSS

MIN_RECORDS = 2  # a run before a restart has at least this many loss records


def starts(steps: list[int], losses: list[float] | None) -> list[int]:
    """The indices (into `steps`, one a record, in file order) where another run starts: the counter goes back
    to within one logging interval of zero and (given `losses`, one a record) the loss starts untrained."""
    found, begun = [], 0
    for i in range(1, len(steps)):
        step = steps[i]
        ahead = steps[i + 1] if i + 1 < len(steps) else None  # the file's last record: back to where its run began
        near = step <= steps[begun] if ahead is None else not (ahead <= step or step > ahead - step)
        if not step < steps[i - 1] or not near or i - begun < MIN_RECORDS:
            continue
        if losses is not None:
            first, last = median(losses[begun: begun + 3]), median(losses[max(begun, i - 3): i])
            if not abs(losses[i] - first) <= abs(losses[i] - last):  # (NaN: no)
                continue
        found.append(i)
        begun = i
    return found


def split(run: ImportedRun) -> list[ImportedRun]:
    """`run`, or each run of several one after the other in its file (by its train loss records), named
    `run 1`, `run 2`, …; the file's warnings go with the first, its kept lines by their steps."""
    import numpy as np

    from stethoscope.logtext.coded import CodedColumns, encode

    cols = run.columns
    every = cols.step_array if isinstance(cols, CodedColumns) else np.fromiter(cols.steps, np.int64, cols.size)
    if not (every[1:] < every[:-1]).any():  # the steps never go back (nearly every log): one pass in C
        return [run]
    coded = encode(cols)
    ends = epoch_ends.placed(coded)  # an epoch's summary numbered by its epoch: no restart
    if ends is not None:
        run = ImportedRun(run.path, run.format, None, run.meta, run.warnings, run.lines, columns=ends)
        coded = ends
        if not (ends.step_array[1:] < ends.step_array[:-1]).any():
            return [run]
    counts = np.bincount(coded.codes, minlength=len(coded.labels))
    key = coded.labels.index(LOSS) if LOSS in coded.labels else int(counts.argmax())  # (AUC alone: XGBoost's CV)
    at = np.flatnonzero(coded.codes == key)
    at = at[np.r_[True, coded.step_array[at][1:] != coded.step_array[at][:-1]]]  # a step's first record (a bar's
    steps = coded.step_array[at]  # loss, then the epoch's line of the same step)
    if not (steps[1:] < steps[:-1]).any():
        return [run]
    anew = starts(steps.tolist(), None)  # the counter starts over from the beginning
    note = _NOTE
    if anew and marked(run.path, len(anew)):
        cuts, note = anew, _MARKED
    elif coded.labels[key] == LOSS:
        cuts = starts(steps.tolist(), coded.value_array[at].tolist())
    else:
        return [run]
    if not cuts:
        return [run]
    bounds = [0, *(_record_start(coded.step_array, int(at[i])) for i in cuts), coded.size]
    count = len(bounds) - 1
    lines = _lines_by_run(run.lines, [int(steps[i]) for i in cuts])
    out = []
    for k in range(count):
        a, b = bounds[k], bounds[k + 1]
        times = coded.time_list
        part = CodedColumns(coded.labels, coded.codes[a:b], coded.step_array[a:b], coded.value_array[a:b],
                            None if times is None else times[a:b], last_time=coded.last_time if k == count - 1 else None)
        meta = {**run.meta, "run_name": f"run {k + 1}", "runs_in_file": count,
                "notes": {**run.meta.get("notes", {}), "runs": note.format(count=count)}}
        out.append(ImportedRun(f"{run.path}#run {k + 1}", run.format, None, meta,
                               run.warnings if k == 0 else [], lines[k], columns=part))
    return out


_FOLD = re.compile(rb"(?im)^[^\w\n]{0,12}(?:(?:cv|cross[- ]validation)\s+)?fold\s*[#:=]?\s*\d+(?:\s*(?:/|of)\s*\d+)?"
                   rb"[^\w\n]*$")  # `Fold 2`, `===== Fold 2/5 =====`: a line that only names the fold
_EPOCH_OF = re.compile(rb"(?i)\bepoch\b[^\w\n]{0,3}\d+\s*/\s*(\d+)")  # `Epoch 3/50`, `Epoch: 0/50,`


def marked(path: str, restarts: int) -> bool:
    """Whether the log at `path` marks `restarts` new runs where its counter starts over: a heading for each fold
    of a cross-validation (`Fold 2`: each fold trains a model anew), or an epoch count whose total changed each time
    (`Epoch 12/50` then `Epoch 1/20`: another run was launched, for another number of epochs, even when it goes on
    from the first one's weights), or a launch's header for each (`launches`: the arguments a process prints as it
    starts; many launches that crash at once print no record, so at least one more header than restarts). A resume
    goes back to its checkpoint's step, not near zero; an epoch's batch count read as the step has none of these."""
    from stethoscope.importers.source import read_bytes

    try:
        data = read_bytes(Path(path))
    except (OSError, InputError):
        return False
    if len(_FOLD.findall(data)) - 1 == restarts or launches(data) > restarts:
        return True
    totals = [total for total, _ in groupby(_EPOCH_OF.findall(data))]
    return len(totals) - 1 == restarts


# A launch's header: the arguments it was started with (argparse's `args: Namespace(lr=0.1, ..)`, a settings dict a
# line, st-gcn's `{'work_dir': './out', 'phase': 'train', ..}` after `Parameters:`): printed once a process.
_LAUNCH = re.compile(rb"(?m)\bNamespace\(\w+=|^[^\n{]{0,80}\{'\w+': ")


def launches(data: bytes) -> int:
    """How many launches the log's headers mark (`_LAUNCH`, a dict only when it holds settings: `config_dump`)."""
    from stethoscope.logtext.config_dump import config_dump

    count = 0
    for m in _LAUNCH.finditer(data):
        if m[0].startswith(b"Namespace"):
            count += 1
        else:
            end = data.find(b"\n", m.start())
            count += config_dump(data[m.start(): end if end >= 0 else len(data)].decode("utf-8", "replace"))
    return count


def _record_start(steps: Any, at: int) -> int:
    """Where the record of the point at `at` starts (the points of its step just before it)."""
    while at > 0 and steps[at - 1] == steps[at]:
        at -= 1
    return at


_NOTE = ("{count} runs one after the other in this file: the step counter started over from the beginning with "
         "an untrained loss; each is diagnosed on its own")

_MARKED = ("{count} runs one after the other in this file: the step counter started over from the beginning where "
           "the log marks another run (a fold's heading, an epoch count of another total); each is diagnosed on its own")


def _lines_by_run(lines: list[Any], firsts: list[int]) -> list[list[Any]]:
    """The kept lines of each run: a line moves to the next run when the step before it falls back to at most
    that run's first step (the lines between two runs stay with the run before)."""
    out: list[list[Any]] = [[] for _ in range(len(firsts) + 1)]
    k, last = 0, None
    for line in lines:
        step = line.step
        if k < len(firsts) and step is not None and last is not None and step < last and step <= firsts[k]:
            k += 1
        last = step if step is not None else last
        out[k].append(line)
    return out


def table_runs(header: list[str], rows: list[list[str]], counter: int) -> list[tuple[str, list[list[str]]]] | None:
    """(name, rows) of each run of a long-format table (a sweep's: `Epoch,…,Optimizer,Learning_Rate`), None when
    it holds one: a run starts where the counter column (`counter`) starts over and a column that names the run
    (one value over each run's rows: the optimizer, the LR) takes another value. The names are those columns'
    values (`Optimizer=Adam, Learning_Rate=0.001`)."""
    steps = [_whole(row[counter]) if counter < len(row) else None for row in rows]
    if None in steps or len(steps) < 2 * MIN_RECORDS:
        return None
    cuts = starts(steps, None)  # type: ignore[arg-type]
    if not cuts:
        return None
    spans = list(zip([0, *cuts], [*cuts, len(rows)]))
    keys = [j for j in range(len(header)) if j != counter and _names_runs(rows, spans, j)]
    if not keys:
        return None
    out = []
    for a, b in spans:
        name = ", ".join(f"{header[j].strip()}={_cell(rows[a], j)[:32]}" for j in keys)
        out.append((name, rows[a:b]))
    return out


def _names_runs(rows: list[list[str]], spans: list[tuple[int, int]], j: int) -> bool:
    """Whether column `j` holds one value over each span's rows and not one over the table."""
    firsts = [_cell(rows[a], j) for a, _ in spans]
    if len(set(firsts)) < 2:
        return False
    return all(_cell(row, j) == first for (a, b), first in zip(spans, firsts) for row in rows[a:b])


def _cell(row: list[str], j: int) -> str:
    return row[j].strip() if j < len(row) else ""


def _whole(text: str) -> int | None:
    try:
        number = float(text)
    except ValueError:
        return None
    return int(number) if number == number and number.is_integer() else None
