"""Tables a trainer prints row by row on its console: a header line of column names, an optional rule
of dashes, then one line of numbers per logged step in the same columns (skorch's epoch table:
`epoch    train_loss    valid_loss     dur`, its improvements coloured with ANSI codes).

The step is the step column (`step`, `iteration` … as in a CSV), else `epoch` (a table that logs once an
epoch numbers its rows by it). Names are resolved as CSV columns are; a row with another number of
cells are placed by column (the rule's dash runs, else the header's names: a blank cell stays blank);
a cell that is not a number (skorch's `+` for a saved checkpoint) is left out, a line with a token
outside every column is no row. Other console output around the table is kept as log lines.
"""

from __future__ import annotations

import re
from pathlib import Path

from stethoscope.importers.base import ImportedRun
from stethoscope.logtext.console_line import ANSI
from stethoscope.logtext.loglines import LineKeeper
from stethoscope.logtext.names import FileNames, scaled_row
from stethoscope.importers.source import is_text, read_text
from stethoscope.logtext.table import PointTable, describe, to_float
from stethoscope.importers.tabular import step_key
from stethoscope.records import LOSS

NAME = "texttable"
_NAME_CELL = re.compile(r"^[A-Za-z_][\w/.\-]*$")
_RULE = re.compile(r"^[\s\-=+|]+$")
_BAR = re.compile(r":?\s+\d{1,3}%\|")  # a progress bar drawn after a row's cells (ultralytics: `640: 45%|███ |`)
_EVAL_WORD = re.compile(r"(?i)(val|valid|validation|eval|test)[_/]")


def _clean(line: str) -> str:
    return ANSI.sub("", line) if "\x1b" in line else line


def _step_column(header: list[str]) -> int | None:
    key = step_key(header) or next((c for c in header if c.lower() == "epoch"), None)  # `Epoch` (ultralytics)
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
    parts = [i for i, _ in columns if raw[i].lower().endswith("_loss") and not _EVAL_WORD.match(raw[i])]
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
    if k:  # a prefix glued to the first name: `INFO:root:epoch`, `[rank0]:epoch`
        first = cells[k - 1]
        glued = max(first.rfind(":"), first.rfind("]"), first.rfind(">"))
        if 0 <= glued < len(first) - 1 and _NAME_CELL.match(first[glued + 1:]) and \
                _is_header([first[glued + 1:], *names]):
            return [m.start() for m in re.finditer(r"\S+", line)][k - 1] + glued + 1
    return None


def _spans(header: str, rule: str | None) -> list[tuple[int, int]]:
    """Each column's character span: the rule's dash runs (tabulate's), else the header's names."""
    runs = [(m.start(), m.end()) for m in re.finditer(r"[-=]+", rule)] if rule else []
    names = [(m.start(), m.end()) for m in re.finditer(r"\S+", header)]
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


def _table_at(lines: list[str], i: int) -> tuple[list[str], list[tuple[int, int]], int, str] | None:
    """(names, spans, index of the first row, the prefix before the header's names) when line i is a header
    followed (past a rule) by a row."""
    text = _clean(lines[i])
    at = _header_at(text)
    if at is None:
        return None
    head = text[:at]
    names = text[at:].split()
    j, rule = i + 1, None
    body = _body(lines[j], head) if j < len(lines) else None
    if body is not None and _RULE.match(body) and body.strip():
        rule, j = body, j + 1
        body = _body(lines[j], head) if j < len(lines) else None
    spans = _spans(text[at:], rule)
    if body is not None and _row(body, spans, _step_column(names) or 0) is not None:
        return names, spans, j, head
    return None


def find_header(lines: list[str]) -> int | None:
    """The index of the first header line followed (past a rule of dashes) by a row of its columns."""
    return next((i for i in range(len(lines)) if _table_at(lines, i) is not None), None)


class TextTableImporter:
    """A metrics table printed on the console, one row per step or epoch (skorch)."""

    name = NAME

    def sniff(self, path: Path, head: str) -> bool:
        return is_text(head) and find_header(head.splitlines()[:2000]) is not None

    def read(self, path: Path) -> ImportedRun:
        lines = read_text(path).splitlines()
        table, keeper, names = PointTable(), LineKeeper(), FileNames()
        header: list[str] = []
        head = ""
        spans: list[tuple[int, int]] = []
        columns: list[tuple[int, str]] = []
        at = 0
        parts: list[int] = []
        for number, line in enumerate(lines, 1):
            found = _table_at(lines, number - 1) if _header_at(_clean(line)) is not None else None
            if found is not None:
                header, spans, _, head = found
                at = _step_column(header) or 0
                columns = [(i, names(c).name) for i, c in enumerate(header) if i != at]
                parts = _parts_of_the_loss(columns, header)
                continue
            body = _body(line, head) if spans else None
            cells = _row(body, spans, at) if body is not None and not _RULE.match(body) else None
            if cells is not None:
                values: dict[str, object] = {name: cells[i] for i, name in columns if to_float(cells[i] or "") is not None}
                if parts and all(to_float(cells[i] or "") is not None for i in parts):
                    values[LOSS] = float(f"{sum(to_float(cells[i] or '') or 0.0 for i in parts):.12g}")
                table.add_row(number, int(_count(cells[at]) or 0), None, *scaled_row(values, names.scales))
            elif line.strip() and not (body is not None and _RULE.match(body)):
                keeper.offer(number, line, None)
        built, rejected = table.build_columns()
        return ImportedRun(str(path), NAME, None, {"columns": header}, describe(rejected, lambda ln: f"{path}:{ln}"),
                           keeper.lines(), columns=built)
