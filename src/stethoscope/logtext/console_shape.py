"""What the first line of a console-log shape teaches the reader: its regex template (`console_fast`) and
its token plan (`console_tokens`), each kept only when it reads that line back to the same numbers."""

from __future__ import annotations

from typing import Any, NamedTuple

from stethoscope.logtext import console_tokens
from stethoscope.logtext.console_epochs import HEADED
from stethoscope.logtext.console_fast import Template, reads_back
from stethoscope.logtext.console_line import Line
from stethoscope.logtext.table import Layout


class Shape(NamedTuple):
    """A shape's regex template and token plan (either may be None), and what its lines are."""

    template: Template | None
    plan: console_tokens.Plan | None
    layout: Layout
    own_step: bool  # the line carries its step counter; else it is a record of the step before it
    bar: bool
    is_dict: bool
    per_epoch: bool = False  # the counter has its epoch before it: it may count within the epoch
    progress: bool = False  # a sample counter, no step counter: lines read one by one, numbered in file order


def learn(text: str, original: str, line: Line, layout: Layout, values: list[Any]) -> Shape:
    """The shape of `line` (`text`: `original` without its ANSI codes), parsed into `values`. The regex
    template needs a line without ANSI codes; the token plan does not."""
    per_epoch = line.epoch is not None
    if line.progress:
        return Shape(None, None, layout, False, False, False, False, True)
    if per_epoch and line.total == HEADED:  # a count under an epoch head (MONAI's, Keras' bar): its epoch is the
        return Shape(None, None, layout, True, False, False, True)  # head's, not the line's: one by one
    template: Template | None = None
    if line.step is not None and text == original and not per_epoch:  # (regex rows carry no epoch check)
        try:
            template = Template(text, line, [v.token for v in values], layout)
        except ValueError:
            template = None
        if template is not None and not reads_back(template, text, line, values):
            template = None
    return Shape(template, console_tokens.plan_of(text, original, line, layout, values), layout,
                 line.step is not None, line.bar, line.body.lstrip().startswith("{"), per_epoch)
