"""Python tracebacks (and C++ `terminate called …` aborts) found in a crash log, per rank stream."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from stethoscope.explain.model import Line

COVER_AFTER = 8  # lines after an exception line that still belong to it (multi-line messages)


@dataclass(slots=True)
class Traceback:
    rank: int | None
    start: int
    end: int = -1
    frames: list[tuple[str, int, str]] = field(default_factory=list)
    exc_type: str = ""
    message: str = ""
    chained: bool = False
    # Printed by Python logging's Handler.handleError (`--- Logging error ---` … `Call stack:`): the handler
    # caught the exception and the process went on, so it is no crash.
    handled: bool = False


_TB_START = re.compile(r"Traceback \(most recent call last\):")
_TB_FRAME = re.compile(r'^\s*File "(.+?)", line (\d+), in (.+)$')
_TB_EXC = re.compile(r"^([A-Za-z_][\w.]*)(?::\s?(.*))?$")
_TB_CHAIN = re.compile(r"^(?:During handling of the above exception|The above exception was the direct cause)")
_CPP_THROW = re.compile(r"terminate called after throwing an instance of '([^']+)'")
_CPP_WHAT = re.compile(r"^\s*what\(\):\s+(.*)$")
_LIBRARY_PATH = re.compile(r"site-packages|dist-packages|/lib/python\d|<frozen|<string>|importlib")
_LOGGING_ERROR = re.compile(r"--- Logging error ---")
_TB_MAX_GAP = 50  # lines of unrelated output tolerated inside one traceback


def find_tracebacks(lines: Sequence[Line]) -> list[Traceback]:
    streams: dict[int | None, list[Line]] = {}
    for line in lines:
        streams.setdefault(line.rank, []).append(line)
    found: list[Traceback] = []
    for rank, stream in streams.items():
        found.extend(_stream_tracebacks(rank, stream))
    return found


def _stream_tracebacks(rank: int | None, stream: list[Line]) -> list[Traceback]:
    found: list[Traceback] = []
    current: Traceback | None = None
    chain_next = False
    for pos, line in enumerate(stream):
        text = line.text
        if _TB_START.search(text):
            handled = bool(_LOGGING_ERROR.search(text) or (pos and _LOGGING_ERROR.search(stream[pos - 1].text)))
            current = Traceback(rank, line.index, chained=chain_next, handled=handled)
            chain_next = False
        elif _TB_CHAIN.match(text):
            chain_next = bool(found)
        elif (throw := _CPP_THROW.search(text)) and current is None:
            what = next((m for later in stream[pos + 1: pos + 4] if (m := _CPP_WHAT.match(later.text))), None)
            found.append(Traceback(rank, line.index, line.index, [], throw.group(1), what.group(1) if what else ""))
        elif current is not None:
            current = _traceback_line(current, line, found)
    return found


def _traceback_line(tb: Traceback, line: Line, found: list[Traceback]) -> Traceback | None:
    frame = _TB_FRAME.match(line.text)
    if frame:
        tb.frames.append((frame.group(1), int(frame.group(2)), frame.group(3).strip()))
        return tb
    if not line.text.strip() or line.text[:1].isspace():
        return tb
    exc = _TB_EXC.match(line.text.strip())
    if exc and tb.frames:
        tb.end, tb.exc_type, tb.message = line.index, exc.group(1), (exc.group(2) or "").strip()
        found.append(tb)
        return None
    return tb if line.index - tb.start < _TB_MAX_GAP else None


def user_frame(tb: Traceback) -> str | None:
    frames = [f for f in tb.frames if not _LIBRARY_PATH.search(f[0])] or tb.frames
    if not frames:
        return None
    path, number, function = frames[-1]
    return f"{path}:{number} in {function}"


def traceback_at(tracebacks: list[Traceback], line: Line) -> Traceback | None:
    for tb in tracebacks:
        # Kernel assert lines are printed just before the traceback they cause, hence the slack.
        if tb.rank == line.rank and tb.start - COVER_AFTER <= line.index <= tb.end + COVER_AFTER:
            return tb
    return None
