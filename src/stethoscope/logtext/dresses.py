"""The dresses a log may wear, told by its head: each printed line wrapped in a record of the tool that captured it
(an asciinema cast, a supervisor's logfmt lines, fluent-bit's stdout records; `importers.dressed` takes the printed
text out of them). The native scanner never maps a dressed log raw (`linescan`), and every reader reads it undressed
(`importers.source`)."""

from __future__ import annotations

import re

CAST = re.compile(rb'\s*\{\s*"version"\s*:\s*[23]\s*[,}]')  # asciinema v2/v3: a JSON header, then events a line
LOGFMT = re.compile(rb"\s*time=\S+ level=[A-Za-z]+\S* msg=")  # Go's slog TextHandler, logrus' text formatter
FLUENT = re.compile(rb"\s*\[\d+\] [\w.\-]+: \[\[?\d+\.\d+")  # fluent-bit's stdout output
_HEAD_LINES = 64  # the lines a dress is told by (all that have text must wear it)


def dressed(head: bytes) -> bool:
    """Whether `head` (a file's first bytes) starts a dressed log: a cast's header, or every line with text (the
    last, which may be cut, aside) wearing one dress."""
    if CAST.match(head):
        return True
    lines = [ln for ln in head.split(b"\n")[:_HEAD_LINES] if ln.strip()]
    if len(lines) > 1 and b"\n" in head:
        lines = lines[:-1]  # the last may be cut
    return bool(lines) and any(all(dress.match(ln) for ln in lines) for dress in (LOGFMT, FLUENT))
