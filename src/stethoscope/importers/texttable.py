"""Tables a trainer prints row by row on its console: a header line of column names, an optional rule
of dashes, then one line of numbers per logged step in the same columns (skorch's epoch table:
`epoch    train_loss    valid_loss     dur`, its improvements coloured with ANSI codes).

The step is the step column (`step`, `iteration` … as in a CSV), else `epoch` (a table that logs once an
epoch numbers its rows by it). Names are resolved as CSV columns are; a row with another number of
cells are placed by column (the rule's dash runs, else the header's names: a blank cell stays blank);
a cell that is not a number (skorch's `+` for a saved checkpoint) is left out, a line with a token
outside every column is no row. Other console output around the table is kept as log lines.
Headers of other shapes (`logtext/table_heads.py`): names of two words under a rule of dashes (spaCy's
`E  #  LOSS NER`, `#` the step), a table drawn with pipes and names over two rows (MATLAB's trainNetwork);
blank lines between a header and its rows are skipped (AWR's `\\r\\r\\n` line ends). A log with no such table
may hold AllenNLP's table by split, an epoch's block of `name | train | validation` lines (`split_table.py`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from stethoscope.importers.base import ImportedRun
from stethoscope.logtext.console_line import ANSI
from stethoscope.logtext.loglines import LineKeeper
from stethoscope.logtext.names import FileNames, scaled_row
from stethoscope.importers.source import is_text, read_text
from stethoscope.importers.split_table import blocks, has_blocks
from stethoscope.logtext.table import PointTable, describe, to_float
from stethoscope.logtext.table_heads import (LOOK_AHEAD, column_name, is_head_name, is_shared_layer_loss, pipe_cells,
                                             pipe_header, ruled_header)
from stethoscope.importers.tabular import step_key
from stethoscope.records import LOSS

NAME = "texttable"
_NAME_CELL = re.compile(r"^[A-Za-z_][\w/.\-]*$")
_RULE = re.compile(r"^[\s\-=+|]+$")
_UPDATES = ("total_train_updates", "train_updates", "total_updates")  # the optimiser's updates done: the step
_RULE_LINE = re.compile(r"-[- ]*-\s*$")  # a line ending in a rule of dashes
# a progress bar drawn after a row's cells (ultralytics: `640: 45%|███ |`), or its count and clock when the bar's
# blocks were lost (YOLOv5 in a notebook's saved output: `640: 100% 15/15 [00:12<00:00,  1.22it/s]`)
_BAR = re.compile(r":?\s+\d{1,3}%(?:\||\s+\d+/\d+\s+\[)")
_EVAL_WORD = re.compile(r"(?i)(val|valid|validation|eval|test)[_/]")
_TWO_NETWORKS = re.compile(r"(?i)(actor|critic|policy|value|q|generator|discriminator|gen|disc|g|d)[_/]")


def _clean(line: str) -> str:
    return ANSI.sub("", line) if "\x1b" in line else line


def _step_column(header: list[str]) -> int | None:
    """The step column: a step's name (`step`, `Iteration`), else spaCy's `#` (beside `E`, its epoch) or the
    updates done (ParlAI's `total_train_updates`), else `epoch` (ultralytics' `Epoch`)."""
    key = step_key(header) or next((c for c in header if c == "#" or c.lower() in _UPDATES), None) or \
        next((c for c in header if c.lower() == "epoch"), None)
    return header.index(key) if key else None


def _count(cell: str | None) -> float | None:
    """A step cell's count: a number, or the N of `N/T` (ultralytics' `1/30`: epoch 1 of 30)."""
    if cell and "/" in cell:
        done, _, total = cell.partition("/")
        return to_float(done) if to_float(total) is not None else None
    return to_float(cell or "")


def _parts_of_the_loss(columns: list[tuple[int, str]], raw: list[str]) -> list[int]:
    """The columns of a loss printed only in parts (ultralytics' `box_loss cls_loss dfl_loss`, no total): the
    trainer optimises their sum, which is the train loss. Empty when a column is the loss itself."""
    if any(name == LOSS for _, name in columns):
        return []
    parts = [i for i, _ in columns if raw[i].lower().endswith("_loss") and not _EVAL_WORD.match(raw[i])
             and not is_shared_layer_loss(raw[i])]
    if any(_TWO_NETWORKS.match(raw[i]) for i in parts):  # an actor's and a critic's (a generator's and a
        return []  # discriminator's) losses are two networks' objectives, each its own optimiser's: no sum
    return parts if len(parts) >= 2 else []


def _is_header(cells: list[str]) -> bool:
    return len(cells) >= 2 and all(_NAME_CELL.match(c) for c in cells) and _step_column(cells) is not None


def _header_at(line: str) -> int | None:
    """Where a header starts in `line` (ANSI-free): at 0, or after what a console prints before every line
    (a date, a logger, a rank tag: `2024-07-24 11:20:33 INFO:root:epoch  train_loss ...`), its names the
    line's last cells; None when the line holds no header."""
    cells = line.split()
    if not cells or not _NAME_CELL.match(cells[-1]):  # (most lines: a number last)
        return None
    k = next((i + 1 for i in range(len(cells) - 1, -1, -1) if not _NAME_CELL.match(cells[i])), 0)
    names = cells[k:]  # the line's last cells that are names: the header's, if it is one
    if _is_header(names):
        return 0 if k == 0 else [m.start() for m in re.finditer(r"\S+", line)][k]  # (leading blanks: the table's)
    if k and (wide := _wide_at(line)) is not None:  # names of words: scikit-learn's `Iter  Train Loss  Remaining Time`
        return wide
    if k:  # a prefix glued to the first name: `INFO:root:epoch`, `[rank0]:epoch`
        first = cells[k - 1]
        glued = max(first.rfind(":"), first.rfind("]"), first.rfind(">"))
        if 0 <= glued < len(first) - 1 and _NAME_CELL.match(first[glued + 1:]) and \
                _is_header([first[glued + 1:], *names]):
            return [m.start() for m in re.finditer(r"\S+", line)][k - 1] + glued + 1
    return None


# A header's names of up to three words each, two blanks or more between them (scikit-learn's gradient boosting:
# `      Iter       Train Loss   Remaining Time`, its cells right-aligned under the names' ends); its first name is
# one word.
_WIDE_NAME = re.compile(r"\S+(?: \S+)*")


def _wide_names(header: str) -> list[re.Match[str]] | None:
    names = list(_WIDE_NAME.finditer(header))
    ok = bool(names) and " " not in names[0].group() and any(" " in m.group() for m in names) and all(
        len(m.group().split()) <= 3 and is_head_name(m.group()) for m in names)  # (a first name of words: a prefix's
    # words glued to it by one blank, `stdout F epoch`: CRI's)
    return names if ok else None


def _wide_at(line: str) -> int | None:
    """Where a header of names of words starts in `line` (its last cells past a prefix), None when it holds none."""
    cells = list(_WIDE_NAME.finditer(line))
    k = len(cells)
    while k and len(cells[k - 1].group().split()) <= 3 and is_head_name(cells[k - 1].group()):
        k -= 1
    names = [m.group() for m in cells[k:]]
    wide = len(names) >= 2 and any(" " in n for n in names) and _step_column(names) is not None
    return cells[k].start() if wide else None


def _names(header: str) -> list[str]:
    wide = _wide_names(header)
    return [m.group() for m in wide] if wide else header.split()


def _spans(header: str, rule: str | None) -> list[tuple[int, int]]:
    """Each column's character span: the rule's dash runs (tabulate's), else the header's names."""
    runs = [(m.start(), m.end()) for m in re.finditer(r"[-=]+", rule)] if rule else []
    names = [m.span() for m in _wide_names(header) or re.finditer(r"\S+", header)]
    return runs if len(runs) == len(names) else names


def _row(line: str, spans: list[tuple[int, int]], at: int) -> list[str | None] | None:
    """The row's cells by column (None for a blank cell: skorch's checkpoint mark), or None when the
    line is no row of this table: a token outside every column, or no whole step."""
    cells: list[str | None] = [None] * len(spans)
    bar = _BAR.search(line)
    if bar is not None:  # the row is the bar's description: its cells end where the bar begins
        line = line[:bar.start()]
    for m in re.finditer(r"\S+", line):
        col = next((i for i, (a, b) in enumerate(spans) if m.start() < b + 1 and m.end() > a - 1), None)
        if col is None or cells[col] is not None:
            return None
        cells[col] = m.group()
    step = _count(cells[at])
    return cells if step is not None and step.is_integer() else None


def _body(line: str, head: str) -> str | None:
    """A line's text in the table's columns: past the prefix its header had (`head`: the same width and
    last character; a line without it is no row)."""
    line = _clean(line)
    if not head:
        return line
    return line[len(head):] if line[len(head) - 1:len(head)] == head[-1:] else None


@dataclass(frozen=True)
class _Layout:
    """Where a table's cells are: columns spanning characters past a prefix (`head`), or the last cells of
    a line drawn with pipes (`spans` empty)."""

    names: list[str]
    spans: list[tuple[int, int]]
    head: str
    at: int  # the step column

    def cells(self, line: str) -> list[str | None] | None:
        if not self.spans:
            found = pipe_cells(_clean(line), len(self.names))
            return found if found is not None and _is_row(found, self.names) else None
        body = _body(line, self.head)
        return _row(body, self.spans, self.at) if body is not None and not _RULE.match(body) else None

    def is_rule(self, line: str) -> bool:
        body = _body(line, self.head) if self.spans else _clean(line)
        return body is not None and bool(_RULE.match(body))


def _is_row(cells: list[str | None], names: list[str]) -> bool:
    step = _count(cells[_step_column(names) or 0])
    return step is not None and step.is_integer()


def _next_text(lines: list[str], j: int) -> int:
    """The first line at or after j that is not blank (`\\r\\r\\n` line ends split into blank lines: AWR's)."""
    while j < len(lines) and not lines[j].strip():
        j += 1
    return j


def _table_at(lines: list[str], i: int) -> _Layout | None:
    """The table headed by line i, when a row follows it (past a rule, blank lines, a header's second row)."""
    text = _clean(lines[i])
    at = _header_at(text)
    j = _next_text(lines, i + 1)
    if at is not None:
        head = text[:at]
        names = _names(text[at:])
        rule = None
        body = _body(lines[j], head) if j < len(lines) else None
        if body is not None and _RULE.match(body) and body.strip():
            rule, j = body, _next_text(lines, j + 1)
            body = _body(lines[j], head) if j < len(lines) else None
        elif j < len(lines) and _RULE_LINE.search(lines[j]) and (body is None or not _row(body, _spans(
                text[at:], None), _step_column(names) or 0)):  # the rule as a message's continuation: its own
            k = _next_text(lines, j + 1)  # prefix (a rank tag, not the logger's), its dashes not at the columns
            body = _body(lines[k], head) if k < len(lines) else None
        spans = _spans(text[at:], rule)
        if body is not None and _row(body, spans, _step_column(names) or 0) is not None:
            return _Layout(names, spans, head, _step_column(names) or 0)
    ruled = _ruled(lines, i, j) if j < len(lines) and _RULE_LINE.search(lines[j]) else None
    if ruled is None and text.rstrip().endswith("|"):
        found = pipe_header([_clean(line) for line in lines[i:i + 1 + LOOK_AHEAD]], 0, _is_row)
        if found is not None and _step_column(found[0]) is not None:
            return _Layout(found[0], [], "", _step_column(found[0]) or 0)
    return ruled


def _ruled(lines: list[str], i: int, j: int) -> _Layout | None:
    """A header whose columns the rule of dashes on line j draws (spaCy's `E    #       LOSS TEXTCAT`)."""
    text = _clean(lines[i])
    found = ruled_header(text, _clean(lines[j]))
    if found is None or _step_column(found[1]) is None:
        return None
    start, names, spans = found
    k = _next_text(lines, j + 1)
    body = _body(lines[k], text[:start]) if k < len(lines) else None
    at = _step_column(names) or 0
    if body is None or _row(body, spans, at) is None:
        return None
    return _Layout(names, spans, text[:start], at)


def _may_head(lines: list[str], i: int) -> bool:
    """Cheap: whether line i could head a table (most lines end in a number, and no rule follows)."""
    text = _clean(lines[i])
    if _header_at(text) is not None or text.rstrip().endswith("|"):
        return True
    j = _next_text(lines, i + 1)
    return j < len(lines) and lines[j].rstrip().endswith("-") and bool(_RULE_LINE.search(lines[j]))


def find_header(lines: list[str]) -> int | None:
    """The index of the first header line followed (past a rule of dashes) by a row of its columns."""
    return next((i for i in range(len(lines)) if _may_head(lines, i) and _table_at(lines, i) is not None), None)


class TextTableImporter:
    """A metrics table printed on the console, one row per step or epoch (skorch)."""

    name = NAME

    def sniff(self, path: Path, head: str) -> bool:
        if not is_text(head):
            return False
        lines = head.splitlines()[:2000]
        return find_header(lines) is not None or has_blocks([_clean(line) for line in lines])

    def read(self, path: Path) -> ImportedRun:
        """The table's run; of a file of several fits one after the other (`read_runs`), the last."""
        return self.read_runs(path)[-1]

    def read_runs(self, path: Path) -> list[ImportedRun]:
        """The table's run, or each run of a file where the table is printed again with its count started over
        (fastai's `fit` prints a fresh `epoch train_loss ..` table from epoch 1 each call): each printing is
        another fit, never laid over the one before by epoch. A table printed again that goes on counting, or
        whose outer count (an `epoch` column beside the step's) moved on, is the same run."""
        lines = read_text(path).splitlines()
        if find_header(lines[:2000]) is None and has_blocks([_clean(line) for line in lines[:2000]]):
            return [_by_split(path, [_clean(line) for line in lines])]
        parts: list[tuple[PointTable, LineKeeper]] = [(PointTable(), LineKeeper())]
        names = FileNames()
        layout: _Layout | None = None
        columns: list[tuple[int, str]] = []
        loss_parts: list[int] = []
        last: tuple[float, float | None] | None = None  # the last row's (count, outer count)
        fresh = False  # a header was printed and no row came under it yet
        for number, line in enumerate(lines, 1):
            found = _table_at(lines, number - 1) if _may_head(lines, number - 1) else None
            if found is not None:
                layout, fresh = found, True
                header = [column_name(c, found.names) for c in found.names]
                columns = [(i, names(c).name) for i, c in enumerate(header) if i != found.at]
                loss_parts = _parts_of_the_loss(columns, header)
                continue
            cells = layout.cells(line) if layout is not None else None
            if cells is not None:
                count = _count(cells[layout.at]) or 0.0
                outer = _outer(layout, cells)
                if fresh and last is not None and _started_over(last, count, outer) and len(parts[-1][0]):
                    parts.append((PointTable(), LineKeeper()))
                fresh, last = False, (count, outer)
                values: dict[str, object] = {name: cells[i] for i, name in columns if to_float(cells[i] or "") is not None}
                if loss_parts and all(to_float(cells[i] or "") is not None for i in loss_parts):
                    values[LOSS] = float(f"{sum(to_float(cells[i] or '') or 0.0 for i in loss_parts):.12g}")
                parts[-1][0].add_row(number, int(count), None, *scaled_row(values, names.scales))
            elif line.strip() and not (layout is not None and layout.is_rule(line)):
                parts[-1][1].offer(number, line, None)
        header_names = layout.names if layout is not None else []
        return [_run(path, table, keeper, header_names, k, len(parts)) for k, (table, keeper) in enumerate(parts)]


def _outer(layout: _Layout, cells: list[str | None]) -> float | None:
    """The row's outer count: its `epoch` cell when the step is another column's (a batch or an iteration)."""
    at = next((i for i, name in enumerate(layout.names) if name.lower() == "epoch"), None)
    return None if at is None or at == layout.at else _count(cells[at])


def _started_over(last: tuple[float, float | None], count: float, outer: float | None) -> bool:
    """Whether a table printed again starts another run: its count went back and no outer count moved on."""
    return count <= last[0] and not (outer is not None and last[1] is not None and outer > last[1])


def _run(path: Path, table: PointTable, keeper: LineKeeper, header: list[str], k: int, count: int) -> ImportedRun:
    built, rejected = table.build_columns()
    meta: dict[str, object] = {"columns": header}
    label = str(path)
    if count > 1:
        label = f"{path}#run {k + 1}"
        meta.update(run_name=f"run {k + 1}", runs_in_file=count, notes={"runs": _RUNS.format(count=count)})
    return ImportedRun(label, NAME, None, meta, describe(rejected, lambda ln: f"{path}:{ln}"), keeper.lines(),
                       columns=built)


_RUNS = ("{count} runs one after the other in this file: the table was printed again with its count started over "
         "(another fit); each is diagnosed on its own")


def _by_split(path: Path, lines: list[str]) -> ImportedRun:
    """A table of metrics by split a line, every epoch (AllenNLP's: `split_table.py`)."""
    table, names = PointTable(), FileNames()
    for number, epoch, cells in blocks(lines):
        values = {names(name).name: cell for name, cell in cells.items() if to_float(cell) is not None}
        table.add_row(number, epoch, None, *scaled_row(values, names.scales))
    built, rejected = table.build_columns()
    return ImportedRun(str(path), NAME, None, {"dialect": "by_split"}, describe(rejected, lambda ln: f"{path}:{ln}"),
                       columns=built)
