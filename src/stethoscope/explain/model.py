"""The data model of `stethoscope explain`: lines, hits, details, signatures, and parsing helpers."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any


# -- data model ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Line:
    """One physical line of the input, its rank prefix removed."""

    index: int  # 0-based; the line number shown to people is index + 1
    rank: int | None
    text: str


@dataclass(frozen=True, slots=True)
class Hit:
    """A line that matched one of a signature's patterns."""

    line: Line
    match: re.Match[str]


@dataclass(slots=True)
class Detail:
    """What a signature's parser adds: numbers, a one-line summary, overrides and extra hints."""

    evidence: dict[str, Any] = field(default_factory=dict)
    summary: str = ""
    severity: str | None = None
    causes: tuple[str, ...] = ()  # put before the signature's own causes
    fixes: tuple[str, ...] = ()


Parser = Callable[[list[Hit], Sequence[Line]], Detail]


@dataclass(frozen=True, slots=True)
class Signature:
    """One known failure: how to recognise it and what to tell the person who owns the run."""

    id: str
    patterns: tuple[re.Pattern[str], ...]
    type: str
    severity: str
    title: str
    causes: tuple[str, ...]
    fixes: tuple[str, ...]
    parse: Parser | None = None
    role: str = "root"  # root | symptom | wrapper
    supersedes: tuple[str, ...] = ()


# The fix several signatures end with, kept in one place.
RESUME = "resume from the last verified checkpoint"


def rx(*patterns: str, flags: int = 0) -> tuple[re.Pattern[str], ...]:
    # MULTILINE: patterns run over the whole (prefix-stripped) text at once, `^`/`$` mean a line.
    return tuple(re.compile(p, flags | re.MULTILINE) for p in patterns)


# -- small parsing helpers ----------------------------------------------------------------------

SIZE_RE = r"([\d.]+)\s*(bytes|[KMGT]i?B|B)\b"
_PER_GIB = {"b": 2.0**-30, "bytes": 2.0**-30, "kib": 2.0**-20, "kb": 2.0**-20, "mib": 2.0**-10,
            "mb": 2.0**-10, "gib": 1.0, "gb": 1.0, "tib": 1024.0, "tb": 1024.0}
_TEXT_RANK = re.compile(r"\[(?:[^\]]*\s)?Rank (\d+)\]")


def _gib(number: str, unit: str) -> float:
    return round(float(number) * _PER_GIB[unit.lower()], 6)


def size_gib(text: str, *patterns: re.Pattern[str]) -> float | None:
    for pattern in patterns:
        m = pattern.search(text)
        if m:
            return _gib(m.group(1), m.group(2))
    return None


def hit_rank(hit: Hit) -> int | None:
    if hit.line.rank is not None:
        return hit.line.rank
    m = _TEXT_RANK.search(hit.line.text)
    return int(m.group(1)) if m else None


def ranks_of(hits: list[Hit]) -> list[int]:
    """The ranks the hits came from (a line prefix or an NCCL "[Rank N]" tag), sorted."""
    return sorted({r for r in map(hit_rank, hits) if r is not None})


def first_group(hits: list[Hit], pattern: re.Pattern[str]) -> re.Match[str] | None:
    for hit in hits:
        m = pattern.search(hit.line.text)
        if m:
            return m
    return None


def fmt_gib(value: float) -> str:
    return f"{value:.2f} GiB" if value >= 0.1 else f"{value * 1024:.0f} MiB"


def lines_after(hit: Hit, lines: Sequence[Line], count: int) -> Sequence[Line]:
    return lines[hit.line.index : hit.line.index + count]
