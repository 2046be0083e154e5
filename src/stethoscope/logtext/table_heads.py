"""Headers of console tables that are no single line of one-word names: a header whose columns the rule
of dashes under it draws (spaCy's `E    #       LOSS TEXTCAT  CATS_SCORE` over `---  ------  ------------`,
names of two words), and a table drawn with pipes (MATLAB's trainNetwork: `|  Epoch  |  Iteration  |
Mini-batch  |` over `|         |             |     Loss     |` between `|====|` rules, a name's words spread
over the header's rows). Used by `importers/texttable.py`, which reads the rows.

A table's lines may carry what a logger prints before a message (a date, a level, a rank tag); a header
or rule printed as a message's continuation carries none, so the rule's runs count from the rule's own
first dash, and a pipe table's cells from the line's end.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_RULE_TAIL = re.compile(r"[-=]+(?: +[-=]+)+ *$")  # a rule of >= 2 runs ending the line (after any prefix)
_PIPE_RULE = re.compile(r"[|+][-=+|: ]*[-=][-=+|: ]*[|+] *$")  # `|=====|`, `+----+----+`, `|---|---|`
_HEAD_NAME = re.compile(r"^(?=.*[A-Za-z#])[A-Za-z#(][\w .\-/()%#:]*$")  # `Mini-batch`, `(hh:mm:ss)`, `#`
_START = re.compile(r"(?:^|(?<=[\s:\]>|-]))\S")  # where a table may start after a prefix
_UNIT = re.compile(r"\s*\([^)]*\)")  # `Time Elapsed (hh:mm:ss)`: the unit a name states, not its words
_TRAIN_WORDS = ("mini-batch ", "minibatch ")  # MATLAB's `Mini-batch Loss`: the batch being trained on
_NO_OBJECTIVE = ("tok2vec", "transformer")  # a shared layer's 'loss' is what its listeners send it back
LOOK_AHEAD = 6  # lines between a header and its first row (rules, a header's second row, blank lines)


def is_head_name(cell: str) -> bool:
    return bool(_HEAD_NAME.match(cell))


def ruled_header(header: str, rule: str) -> tuple[int, list[str], list[tuple[int, int]]] | None:
    """(where the table starts in `header`, its names, the columns' spans from there) when each run of the
    rule ending `rule` begins under a name of `header`'s end (names may hold a space: `LOSS TEXTCAT`)."""
    tail = _RULE_TAIL.search(rule)
    header = header.rstrip()
    if tail is None or not header:
        return None
    runs = [(m.start(), m.end()) for m in re.finditer(r"[-=]+", rule[tail.start():])]
    for m in _START.finditer(header):
        names = _names_over(header[m.start():], runs)
        if names is not None:
            return m.start(), names, runs
    return None


def _names_over(text: str, runs: list[tuple[int, int]]) -> list[str] | None:
    if runs[0][0] != 0:
        return None
    names = []
    for k, (a, _) in enumerate(runs):
        end = runs[k + 1][0] if k + 1 < len(runs) else len(text)
        name = " ".join(text[a:end].split())
        if not name or text[a:a + 1].isspace() or (a and not text[a - 1].isspace()) or not is_head_name(name) \
                or len(name.split()) > 3:
            return None
        names.append(name)
    return names


def pipe_cells(line: str, width: int) -> list[str] | None:
    """The last `width` cells of a line drawn with pipes (`... |  1 |  0.25 |`), or None."""
    text = line.rstrip()
    if not text.endswith("|"):
        return None
    parts = text.split("|")
    if len(parts) < width + 2:
        return None
    return [p.strip() for p in parts[-width - 1:-1]]


def pipe_header(lines: list[str], i: int,
                is_row: Callable[[list[str], list[str]], bool]) -> tuple[list[str], int] | None:
    """(names, index of the first row) when line i heads a pipe table: cells of names (after any prefix: the
    text before the first pipe is no cell), then more rows of the names' words, rules or blank lines, then a
    row (`is_row(cells, names)`)."""
    text = lines[i].rstrip()
    if not text.endswith("|") or _PIPE_RULE.search(text):
        return None
    parts = text.split("|")[1:-1]
    width = 0
    while width < len(parts) and is_head_name(parts[-1 - width].strip()):
        width += 1
    if width < 2:
        return None
    names = [p.strip() for p in parts[-width:]]
    for j in range(i + 1, min(len(lines), i + 1 + LOOK_AHEAD)):
        line = lines[j]
        if not line.strip() or _PIPE_RULE.search(line):
            continue
        cells = pipe_cells(line, width)
        if cells is None:
            return None
        if is_row(cells, names):
            return names, j
        if not all(not c or is_head_name(c) for c in cells):
            return None
        names = [f"{n} {c}".strip() for n, c in zip(names, cells)]  # a name's words over two rows
    return None


def column_name(raw: str, raws: list[str]) -> str:
    """A header name of several words as a metric's name: its unit dropped, MATLAB's `Mini-batch` the train
    split, spaCy's `LOSS NER` the NER component's loss (the loss itself when it is the table's only task
    component: the update minimises the components' losses, a shared tok2vec's excepted)."""
    if raw == "E" and "#" in raws:  # spaCy's epoch, beside its step
        return "epoch"
    name = _UNIT.sub("", raw).strip() or raw
    low = name.lower()
    if low.startswith(_TRAIN_WORDS):
        return "train_" + name.split(None, 1)[1]
    if low.startswith("loss ") and len(name.split()) == 2:
        part = name.split()[1]
        tasks = [r for r in raws if r.lower().startswith("loss ") and r.split()[-1].lower() not in _NO_OBJECTIVE]
        return "loss" if tasks == [raw] else f"{part.lower()}_loss"
    return name


def is_shared_layer_loss(name: str) -> bool:
    return name.lower().removesuffix("_loss") in _NO_OBJECTIVE
