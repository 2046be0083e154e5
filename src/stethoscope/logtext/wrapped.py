"""Lines a terminal hard-wrapped at its width, joined again: a `tmux capture-pane -p` without `-J` (or a screen
log) cuts every line longer than the pane into rows of exactly the pane's width, so a record's step and its loss
can land on two rows, and an eval's `[valid]` tag on the row before its values.

A file is read as wrapped when its longest rows all have one length W (at least 80 columns: no pane is narrower),
at least three rows have it, and as many as are a little shorter (up to 8 columns: every longer line
piles up at the pane's width, while a log's own longest lines spread below their maximum: Ignite's fixed-width
`.. evaluator INFO: Engine run finished. Time taken: 00:00:00.009` beside its 81- and 83-column lines), no row
holds a carriage return (the terminal drew them: a pane shows what is left),
and the rows after the W-long ones do not start as the file's lines start (the rows that follow a shorter row: a
line's own beginning). A log whose records are printed to one fixed width is no pane: its W-long records are
followed by records, which start as lines start, and it is left as it is. Each W-long row is
then joined with the row after it, unless that row starts as lines start (a line that was W long by chance).
"""

from __future__ import annotations

import re

MIN_WIDTH = 80  # the narrowest terminal
_NEAR = 8  # the columns below the width whose rows a log's own line lengths would put near it
_HEAD = 64 * 1024  # the bytes the width is learnt from (about 500 rows; 1 ms a read)
_DIGITS = re.compile(r"\d+")


def _start(row: str) -> str:
    """How a row starts, its numbers' digits aside (`2024-07-24 11:00` and `2024-07-25 12:13` start alike)."""
    return _DIGITS.sub("0", row[:12])


def pane_width(rows: list[str]) -> int | None:
    """The width the rows were wrapped at, None when they were not wrapped (see the module's docstring)."""
    if len(rows) < 4:
        return None
    width = max(map(len, rows))
    at = [i for i, row in enumerate(rows[:-1]) if len(row) == width]
    if width < MIN_WIDTH or len(at) < 3 or any("\r" in row for row in rows):  # a terminal drew the `\r`s
        return None
    near = sum(width - _NEAR <= len(row) < width for row in rows)  # lines a little shorter than the longest
    starts = _starts(rows, width)
    alike = sum(_begins(rows, i, starts) for i in at)
    return width if alike * 5 <= len(at) and near <= len(at) else None


def _starts(rows: list[str], width: int) -> set[str]:
    """How the lines start: the rows after a row shorter than the width."""
    return {_start(rows[i + 1]) for i, row in enumerate(rows[:-1]) if len(row) < width and rows[i + 1].strip()}


def _begins(rows: list[str], i: int, starts: set[str]) -> bool:
    """Whether the row after the W-long row `i` begins a line: it starts as lines start, or as row `i` itself does
    (a record after a record of one fixed width)."""
    after = _start(rows[i + 1])
    return after in starts or after == _start(rows[i])


def rejoin(data: bytes) -> bytes:
    """`data` with its hard-wrapped rows joined again when it is a pane's capture (else `data` itself)."""
    if len(data) < MIN_WIDTH * 4 or b"\n" not in data[:_HEAD]:
        return data
    head = data[:_HEAD].decode("utf-8", "replace").split("\n")[:-1]
    crlf = bool(head) and head[0].endswith("\r")
    width = pane_width([row[:-1] if crlf and row.endswith("\r") else row for row in head])
    if width is None:
        return data
    rows = data.decode("utf-8", "replace").split("\n")
    if crlf:
        rows = [row[:-1] if row.endswith("\r") else row for row in rows]
    starts = _starts(rows, width)
    out: list[str] = []
    joining = False
    for i, row in enumerate(rows):
        if joining:
            out[-1] += row
        else:
            out.append(row)
        joining = len(row) == width and i + 1 < len(rows) and not _begins(rows, i, starts)
    return ("\r\n" if crlf else "\n").join(out).encode("utf-8")
