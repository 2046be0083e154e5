"""The lines of a text log that carry no metrics but matter: errors, tracebacks, timestamped notes,
warnings, checkpoints, restarts, GC pauses.

`LineKeeper` keeps them within a bound: every alert line (errors, tracebacks, NCCL/CUDA/ECC
trouble) up to ALERT_HEAD first + ALERT_TAIL last, and the last CONTEXT_TAIL other notable lines.
Naive timestamps are read as UTC (logs do not say their zone; UTC at least reads the same everywhere).
"""

from __future__ import annotations

import calendar
import re
from collections import deque
from functools import lru_cache

from stethoscope.logtext.columns import LogLine

ALERT_HEAD = 500
ALERT_TAIL = 2000
CONTEXT_TAIL = 2000

_ALERT = re.compile(
    r"Traceback|Error\b|ERROR|Exception|error:|CUDA error|out of memory|cudaError|NCCL(?! INFO)|"
    r"uncorrectable ECC|ECC error|\bOOM\b|Killed|SIG(?:TERM|KILL|ABRT|SEGV|BUS|INT|HUP)\b|Segmentation fault|"
    r"core dumped|Watchdog|[Tt]imed out|[Tt]imeout\b|FAILED|[Ff]atal|terminate called|what\(\):|^frame #\d+|"
    r"OVERFLOW|[Oo]verflow|\b[Hh]ung\b|\b[Hh]ang(?:s|ing)?\b")
# Not trouble by themselves, but what a diagnosis wants next to the metrics: warnings, checkpoints,
# restarts, GC pauses, skips, stalls.
_CONTEXT = re.compile(r"WARN|[Ww]arning|[Cc]heckpoint|[Ss]aving|[Ss]aved|[Rr]esum|[Rr]estart|\bGC\b|[Gg]arbage|"
                      r"collected \d+ objects|[Ss]kipp|[Ss]tall|[Ss]traggl|[Pp]reempt|[Ee]xiting|[Tt]erminat")
_TIMESTAMP = re.compile(
    r"^\[?(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2}(?:[.,]\d{1,6})?)\s?(Z|[+-]\d{2}:?\d{2})?\]?")
# Dates and clocks of other forms: skipped in front of a line (never a step counter), their time not read.
# A date with its year (Y-M-D, Y/M/D, D.M.Y, M/D/Y) and an optional clock; a month/day without a year only
# with a clock after it (`07/24 11:20:07`: a bare `07/24` is a progress counter); a clock alone; syslog's
# `Jul 24 11:20:07`. Ranges are checked in `skip_stamp`.
_HMS = re.compile(r"(\d{1,2}):(\d{2}):(\d{2})")
_CLOCK = r"\d{1,2}:\d{2}:\d{2}(?:[.,]\d{1,9})?(?:\s?[AaPp][Mm])?(?:Z|[+-]\d{2}:?\d{2})?"
_OTHER_STAMP = re.compile(
    rf"^\[?(?:(?P<y1>\d{{4}})[-/.](?P<a1>\d{{1,2}})[-/.](?P<b1>\d{{1,2}})(?:[ T_]{_CLOCK})?"
    rf"|(?P<a2>\d{{1,2}})[-/.](?P<b2>\d{{1,2}})[-/.](?P<y2>\d{{4}})(?:[ T_,]\s?{_CLOCK})?"
    rf"|(?P<a3>\d{{1,2}})[-/](?P<b3>\d{{1,2}})[ T_]{_CLOCK}"
    rf"|(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?\s+\d{{1,2}},?(?:\s+\d{{4}})?\s+{_CLOCK}"
    rf"|{_CLOCK})\]?(?![\d:/.])")
# Launcher prefixes in front of every line: torchrun `[default7]:` / `[rank0]:`, mpirun `[1,0]<stdout>:`.
RANK_PREFIX = re.compile(r"^\s*(?:\[(?:default|rank)?\d+\]:|\[\d+,\d+\]<std(?:out|err)>:) ?")


def parse_timestamp(text: str) -> tuple[float | None, int]:
    """(unix seconds, length of the timestamp) for a line that starts with one, else (None, 0)."""
    m = _TIMESTAMP.match(text)
    if m is None:
        return None, 0
    year, month, day, hour, minute = (int(g) for g in m.groups()[:5])
    second = float(m.group(6).replace(",", "."))
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour < 24 and minute < 60 and second < 61):
        return None, 0
    return minute_start(year, month, day, hour, minute) + second - _offset_s(m.group(7)), m.end()


def skip_stamp(text: str) -> int:
    """The length of a date or clock of another form than `parse_timestamp` reads at the start of `text`
    (0: none): what a console reader skips so that no part of a date or a clock is taken for a step."""
    m = _OTHER_STAMP.match(text)
    if m is None:
        return 0
    for a, b in ((m["a1"], m["b1"]), (m["a2"], m["b2"]), (m["a3"], m["b3"])):
        if a is not None and not _is_month_day(int(a), int(b)):
            return 0
    clock = _HMS.search(m.group())
    if clock and (int(clock[1]) > 23 or int(clock[2]) > 59 or int(clock[3]) > 60):
        return 0
    return m.end()


def _is_month_day(a: int, b: int) -> bool:
    """Month and day in either order (M/D/Y or D.M.Y)."""
    return (1 <= a <= 12 and 1 <= b <= 31) or (1 <= b <= 12 and 1 <= a <= 31)


def stamp_seconds(raw: bytes) -> float:
    """Unix seconds of b"YYYY-MM-DD HH:MM:SS[.ffffff]" (how Megatron-LM stamps its records), as UTC;
    the same arithmetic as `parse_timestamp`, so both paths give the same float."""
    minute = minute_start(int(raw[0:4]), int(raw[5:7]), int(raw[8:10]), int(raw[11:13]), int(raw[14:16]))
    return minute + float(raw[17:].replace(b",", b".")) - 0.0


@lru_cache(maxsize=4096)
def minute_start(year: int, month: int, day: int, hour: int, minute: int) -> int:
    """Unix seconds at the start of a UTC minute (cached: a log's lines share few minutes)."""
    return calendar.timegm((year, month, day, hour, minute, 0, 0, 0, 0))


def _offset_s(zone: str | None) -> float:
    if not zone or zone == "Z":
        return 0.0
    digits = zone[1:].replace(":", "")
    sign = -1 if zone[0] == "-" else 1
    return sign * (int(digits[:2]) * 3600 + int(digits[2:4]) * 60)


def strip_rank(text: str) -> str:
    """`text` without a launcher's rank prefix."""
    m = RANK_PREFIX.match(text)
    return text[m.end():] if m else text


def is_alert(text: str) -> bool:
    """A line that reports trouble (error, traceback, NCCL/CUDA/ECC, overflow, timeout, hang …)."""
    return _ALERT.search(text) is not None


class LineKeeper:
    """Collects notable lines of one log, bounded; `lines()` returns them in file order."""

    def __init__(self) -> None:
        self._alert_head: list[LogLine] = []
        self._alert_tail: deque[LogLine] = deque(maxlen=ALERT_TAIL)
        self._context: deque[LogLine] = deque(maxlen=CONTEXT_TAIL)
        self._in_traceback = False
        self.alerts = 0

    def offer(self, line: int, text: str, step: int | None) -> bool:
        """Keep `text` if it matters (alert, traceback body, warning, timestamped); True when kept."""
        text = text.rstrip()
        body = strip_rank(text)
        time, _ = parse_timestamp(body)
        alert = self._traceback_part(body) or is_alert(body)
        if not (alert or time is not None or _CONTEXT.search(body)):
            return False
        self.keep(LogLine(line, text, step, time), alert)
        return True

    def keep(self, entry: LogLine, alert: bool) -> None:
        """Keep `entry` unconditionally, as an alert or as context."""
        if not alert:
            self._context.append(entry)
            return
        self.alerts += 1
        if len(self._alert_head) < ALERT_HEAD:
            self._alert_head.append(entry)
        else:
            self._alert_tail.append(entry)

    def _traceback_part(self, body: str) -> bool:
        if body.startswith("Traceback (most recent call last)"):
            self._in_traceback = True
            return True
        if self._in_traceback:
            # The indented frames belong to the traceback; the first unindented line is its message.
            self._in_traceback = body[:1] in (" ", "\t")
            return True
        return False

    def lines(self) -> list[LogLine]:
        """Everything kept, in file order."""
        merged = {entry.line: entry for entry in (*self._context, *self._alert_head, *self._alert_tail)}
        return [merged[k] for k in sorted(merged)]
