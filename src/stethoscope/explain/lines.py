"""Reading a crash log: lines with their rank prefix removed, and the training step each line follows."""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence

from stethoscope.explain.model import Line

_PREFIXES = (re.compile(r"^(?:[\w.\-]+:\s)?\[(?:default|rank)(\d+)\]:\s?"),
             re.compile(r"^\[\d+,(\d+)\]<std(?:out|err)>:\s?"),
             re.compile(r"^\s{0,3}(\d{1,5}):\s"))


def split_lines(text: str) -> list[Line]:
    lines = []
    # Only "\n" ends a line (as for grep -n); a bare "\r" is a progress-bar rewrite within a line.
    for i, raw in enumerate(text.removesuffix("\n").split("\n")):
        raw = raw.removesuffix("\r")
        rank = None
        for prefix in _PREFIXES:
            m = prefix.match(raw)
            if m:
                rank, raw = int(m.group(1)), raw[m.end():]
                break
        lines.append(Line(i, rank, raw))
    return lines


_STEP_PREFILTER = re.compile(r"step|iter|/\d|num_updates", re.IGNORECASE)
_TQDM = re.compile(r"\|\s*(\d+)/\d+\s*\[")
_STEP_PATTERNS = (
    re.compile(r"\biter(?:ation)?\b['\"]?\s*[:=#]?\s*(\d+)(?![\d.eE])", re.IGNORECASE),
    re.compile(r"\b(?:global[_ ])?step\b['\"]?\s*[:=#]?\s*(\d+)(?![\d.eE])", re.IGNORECASE),
    re.compile(r"\bnum_updates\b\s*[:=]?\s*(\d+)"),
    _TQDM,
)
_NOT_TRAINING_BAR = re.compile(r"Loading|Downloading|Fetching|Generating|Map\b|shards|Tokeniz|Filter|Saving|"
                               r"Validat|Evaluat|Predict|Sanity", re.IGNORECASE)
StepMarker = tuple[int, int, int]  # (line index, column, step)


def step_markers(lines: Sequence[Line]) -> list[StepMarker]:
    # One marker per progress segment (tqdm rewrites a line with \r): its leftmost counter, because
    # lines such as "iter 8 step 1: loss nan" lead with the counter the log is numbered by.
    markers = []
    for line in lines:
        if not _STEP_PREFILTER.search(line.text):
            continue
        offset = 0
        for segment in line.text.split("\r"):
            found = _segment_step(segment)
            if found is not None:
                markers.append((line.index, offset + found[0], found[1]))
            offset += len(segment) + 1
    return markers


def _segment_step(segment: str) -> tuple[int, int] | None:
    best: tuple[int, int] | None = None
    for pattern in _STEP_PATTERNS:
        m = pattern.search(segment)
        if m and (best is None or m.start() < best[0]):
            if pattern is _TQDM and _NOT_TRAINING_BAR.search(segment):
                continue
            best = (m.start(), int(m.group(1)))
    return best


def step_before(markers: list[StepMarker], index: int, column: int) -> int | None:
    i = bisect.bisect_left(markers, (index, column))
    return markers[i - 1][2] if i else None
