"""The fast path of the console reader: one literal regex per line shape, matched over whole blocks.

A shape is a line with its digits removed. The first line of a shape is parsed in full
(`console_line.parse`); `Template` turns it into a regex of the whole line in which the step, the
values, the timestamp and the launcher rank are groups, every other number matches any number and
every other character is literal. A run of consecutive lines of one shape is then read by one
`findall` over the run (C speed); when the run does not give one row per line (a line that only looks
alike), each of its lines is matched alone and the misses go back to the full parser.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any
from itertools import compress, repeat
from operator import add, itemgetter

from stethoscope.logtext.console_line import NUMBER, Line
from stethoscope.logtext.loglines import stamp_seconds
from stethoscope.logtext.table import Layout

_ANY_NUMBER = r"[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_NAN = r"[-+]?(?:nan|NaN|NAN|inf|Inf|INF|infinity|Infinity)"
_LAUNCHER = r"\s*(?:\[(?:default|rank)?(\d+)\]:|\[\d+,(\d+)\]<std(?:out|err)>:) ?"
_STAMP = r"(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d{1,6})?)"
_DIGITS = re.compile(r"\d+")


class Template:
    """The regex of one line shape and where its step, values, time and rank are among the groups."""

    def __init__(self, text: str, line: Line, tokens: list[int], layout: Layout) -> None:
        roles: list[str] = []
        parts = ["^"]
        pos = 0
        if line.rank is not None:
            launcher = re.match(_LAUNCHER, text)
            if launcher is None:
                raise ValueError("no launcher prefix")
            parts.append(_LAUNCHER)
            roles += ["rank", "rank"]
            pos = launcher.end()
        wanted = {line.step_token: "step", **{t: f"value{i}" for i, t in enumerate(tokens)}}
        for i, m in enumerate(NUMBER.finditer(text)):
            if m.start() < pos:
                continue
            if i == line.time_token:
                stamp = re.match(_STAMP, text[m.start():])
                if stamp is None:
                    raise ValueError("a timestamp of another form")
                parts.append(_literal(text[pos:m.start()]) + _STAMP)
                roles.append("time")
                pos = m.start() + stamp.end()
                continue
            parts.append(_literal(text[pos:m.start()]))
            number = _NAN if m.group()[-1:].isalpha() else _ANY_NUMBER
            role = wanted.get(i)
            parts.append(f"({number})" if role else f"(?:{number})")
            if role:
                roles.append(role)
            pos = m.end()
        parts.append(_literal(text[pos:]) + r"[ \t]*$")
        pattern = "".join(parts).encode()
        self.match: Callable[[bytes], re.Match[bytes] | None] = re.compile(pattern).match
        self._pattern, self._findall = pattern, None  # the run's regex: compiled when a run is read by it
        self.layout = layout
        self.rank = roles.index("rank") if "rank" in roles else None
        self.step = roles.index("step")
        self.time = roles.index("time") if "time" in roles else None
        self.values = tuple(roles.index(f"value{i}") for i in range(len(tokens)))
        self.bar = line.bar
        self.single = len(roles) == 1

    def findall(self, text: bytes) -> list[Any]:
        """`findall` of the shape's regex over lines of text (MULTILINE). Compiled on first use (~0.6 ms a
        shape): where the native scanner reads a shape's runs, its lines never come here."""
        if self._findall is None:
            self._findall = re.compile(self._pattern, re.MULTILINE).findall
        return self._findall(text)

    def rows(self, block: list[bytes]) -> list[tuple[bytes, ...]] | None:
        """One row of groups per line of `block`, or None when some line does not match."""
        found = self.findall(b"\n".join(block))
        if len(found) != len(block):
            return None
        return [(row,) for row in found] if self.single else found

    def columns(self, rows: list[tuple[bytes, ...]], keep_rank: bytes | None
                ) -> tuple[list[bool] | None, list[bytes], list[tuple[bytes, ...]], list[float | None] | None]:
        """(which rows to keep (None: all), steps, values per row, times) with thousands separators gone."""
        keep = None
        if self.rank is not None and keep_rank is not None:
            ranks = list(map(_rank, rows, repeat(self.rank)))
            keep = [r == keep_rank for r in ranks]
            if all(keep):
                keep = None
            else:
                rows = list(compress(rows, keep))
        steps = _plain(list(map(itemgetter(self.step), rows)))
        values = list(zip(*(_plain(list(map(itemgetter(i), rows))) for i in self.values)))
        times = stamps(list(map(itemgetter(self.time), rows))) if self.time is not None else None
        return keep, steps, values, times


def _plain(column: list[bytes]) -> list[bytes]:
    """`column` without thousands separators (`15,723`)."""
    if b"," not in b"".join(column):
        return column
    return list(map(bytes.replace, column, repeat(b","), repeat(b"")))


class _Minutes(dict):  # type: ignore[type-arg]
    def __missing__(self, stamp: bytes) -> float:
        self[stamp] = value = stamp_seconds(stamp + b":00")
        return value


def stamps(raw: list[bytes]) -> list[float]:
    """Unix seconds of many `YYYY-MM-DD HH:MM:SS[.,]fff` stamps (as `stamp_seconds`), in C-level passes:
    the minute looked up in a cache, the seconds parsed as one float."""
    minutes = list(map(_Minutes().__getitem__, map(itemgetter(slice(0, 16)), raw)))
    seconds = map(float, map(bytes.replace, map(itemgetter(slice(17, None)), raw), repeat(b","), repeat(b".")))
    return list(map(add, minutes, seconds))


def _rank(row: tuple[bytes, ...], at: int) -> bytes:
    return row[at] or row[at + 1]


def _literal(text: str) -> str:
    """`text` as a regex: every character literal except digit runs (`rank0`, `A100`), which match any."""
    out, pos = [], 0
    for m in _DIGITS.finditer(text):
        out.append(re.escape(text[pos:m.start()]) + r"\d+")
        pos = m.end()
    out.append(re.escape(text[pos:]))
    return "".join(out)


def reads_back(template: Template, text: str, line: Line, values: list[Any]) -> bool:
    """Whether `template` reads `line` (as the full parser read it into `values`) to the same numbers."""
    m = template.match(text.encode())
    if m is None:
        return False
    groups = m.groups()
    read = [groups[i].decode() for i in template.values]
    stamp = template.time is None or stamp_seconds(groups[template.time]) == line.time
    step = groups[template.step].replace(b",", b"")
    return stamp and read == [v.text for v in values] and step.isdigit() and int(step) == line.step
