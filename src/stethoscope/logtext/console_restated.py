"""A record printed twice, the second time under a counter of another kind. TFLearn's TermLogger prints each record
on two lines: `Training Step: 860  | total loss: 0.29368 | time: 7.951s`, then `| Adam | epoch: 002 | loss: 0.29368 -
acc: 0.9165 -- iter: 06400/55000`, whose `iter` counts the samples of the epoch (its total is the data set's size),
not steps. Read as a counter, it numbered every record twice, on two axes that cross (the log fell apart into a run
an epoch). The rule: a line whose counter gives another number than the step of the record on the line right before
it, on another count (its total is not that line's: Keras' bar ends its epoch in a shape of its own), and whose
train loss is that record's to the last digit printed, restates that record: its values belong to that step (a
continuation line) and its counter numbers nothing. Its counter's total is then known to count samples:
a later line under that total (the epoch's last, with its validation: a shape of its own) is read so too. Neither
holds for a line whose names are those of a line already read at a step of its own: records of one shape are one
counter's, and two in a row may print the same loss by chance (a long log's 3-digit losses)."""

from __future__ import annotations

from typing import Any

from stethoscope.records import LOSS

_DIGITS = 3  # the significant digits a loss needs to tell one record's from another's (not `0.00`, not `nan`)


def loss_text(pairs: list[Any]) -> str | None:
    """The train loss of a parsed line's `(name, value)` pairs, as printed (None: none)."""
    return next((v.text for n, v in pairs if n[0] == LOSS), None)


class Restated:
    """The last step line the full parser read, and the counters' totals found to count samples."""

    def __init__(self) -> None:
        self.before: tuple[int, int, str, int | None] | None = None  # (line number, step, loss as printed, total)
        self.totals: set[int] = set()
        self.numbered: set[tuple[str, ...]] = set()  # the names of lines read at steps of their own
        self.seen: tuple[int, int | None] = (0, None)  # the line `check` was last given: its number, its total

    def check(self, number: int, line: Any, pairs: list[Any]) -> None:
        """Make the parsed `line` (number `number`, its `pairs`) a continuation of the record before it when it
        restates that record (see the module's docstring)."""
        self.seen = (number, line.total)
        if line.step is None or line.eval or line.total is None or tuple(n[0] for n, _ in pairs) in self.numbered:
            return
        if line.total not in self.totals:
            loss, before = loss_text(pairs), self.before
            if (before is None or before[0] != number - 1 or loss != before[2] or line.step == before[1]
                    or line.total == before[3] or sum(c.isdigit() for c in loss.strip("-+0.")) < _DIGITS):
                return
            self.totals.add(line.total)
        line.step = line.epoch = line.total = line.step_token = None
        line.record = True

    def read(self, number: int, step: int | None, pairs: list[Any]) -> None:
        """Note the line `number`, just read as a record at its own `step` (None: no counter of its own)."""
        loss = loss_text(pairs)
        total = self.seen[1] if self.seen[0] == number else None
        self.before = None if step is None or loss is None else (number, step, loss, total)
        if step is not None:
            self.numbered.add(tuple(n[0] for n, _ in pairs))
