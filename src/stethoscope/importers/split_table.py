"""A table of metrics by split printed every epoch, a metric a line (AllenNLP's console_logger, after its
trainer's `Epoch 3/19` line):

    ... gradient_descent_trainer - Epoch 3/19
    ... console_logger -                        Training |  Validation
    ... console_logger - accuracy           |     0.843  |     0.828
    ... console_logger - loss               |     3.828  |     3.971
    ... console_logger - gpu_0_memory_MB    |  1298.895  |       N/A

Each block is the record of the epoch the head before it names (its number as printed); a column's split is
its header's word (`Training`: the train split, `Validation`: the eval's), `N/A` no value. Used by
`importers/texttable.py` for a log that holds no table of one row a step.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_EPOCH = re.compile(r"(?i:epoch)\s*:?\s*(\d+)(?:\s*/\s*\d+)?\s*$")
_SPLITS = re.compile(r"(?:^|\s)([A-Za-z]+) +\| +([A-Za-z]+)\s*$")
_ROW = re.compile(r"(?:^|\s)([A-Za-z_][\w./\-]*) +\| +(\S+) +\| +(\S+)\s*$")
_WORDS = {"training": "train", "train": "train", "validation": "validation", "valid": "validation",
          "val": "validation", "test": "test"}
_NEAR = 2  # lines between an epoch's head and its split header
_HEAD_ENDS = tuple(word.capitalize() for word in _WORDS) + tuple(_WORDS)  # how a split header line ends


def blocks(lines: list[str]) -> Iterator[tuple[int, int, dict[str, str]]]:
    """(line of the block's first row, epoch, {split_name: cell}) for each epoch's block."""
    epoch: int | None = None
    head_at, first = -_NEAR - 1, 0
    splits: tuple[str, str] | None = None
    values: dict[str, str] = {}
    for number, line in enumerate(lines, 1):
        found = _EPOCH.search(line)
        if found:
            if splits is not None and values and epoch is not None:
                yield first, epoch, values
            epoch, head_at, splits = int(found[1]), number, None
            continue
        named = _SPLITS.search(line) if epoch is not None and number - head_at <= _NEAR else None
        if named and named[1].lower() in _WORDS and named[2].lower() in _WORDS:
            splits, values, first = (_WORDS[named[1].lower()], _WORDS[named[2].lower()]), {}, number + 1
            continue
        row = _ROW.search(line) if splits is not None else None
        if row is None:
            if splits is not None and values and epoch is not None:
                yield first, epoch, values
            splits = None
            continue
        values.update({f"{split}_{row[1]}": cell for split, cell in zip(splits, (row[2], row[3]))  # type: ignore[arg-type]
                       if cell != "N/A"})
    if splits is not None and values and epoch is not None:
        yield first, epoch, values


def has_blocks(lines: list[str]) -> bool:
    if not any(line.rstrip().endswith(_HEAD_ENDS) and "|" in line for line in lines):  # (cheap: most logs have none)
        return False
    return next(blocks(lines), None) is not None
