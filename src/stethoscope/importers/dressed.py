"""Logs saved in a dress of another tool: each printed line wrapped in a record of the tool that captured it. The
text the program printed is taken out of each record, in order, and read as the log (`source.utf8`). How a dress
is told by a file's head is `logtext.dresses` (the native scanner asks it too).

- An asciinema cast (`asciinema rec`, v2 or v3): a JSON header `{"version": 2, "width": ..}`, then one event a line,
  `[0.41, "o", "step 10 loss 2.3\\r\\n"]`. The output events' texts, joined, are what the terminal printed; a line is
  often cut over two events, so the texts are joined before they are split into lines.
- A supervisor's logfmt lines (Go's slog TextHandler, logrus' text formatter): `time=2026-11-28T03:04:05.123Z
  level=INFO msg="step 10 loss 2.3" stream=stdout pid=4312`, where `msg` holds the child's line, quoted as Go's
  strconv.Quote quotes (`\\"`, `\\t`, `\\x1b`) when it needs quoting. The attributes after it stay on the line,
  unless one has the same value on every line (the supervisor's labels: `stream=stdout pid=4312`).
- fluent-bit's stdout output: `[0] tail.0: [[1795834000.123456789, {}], {"log"=>"step 10 loss 2.3",
  "stream"=>"stdout"}]` (before v2.1 `[0] tail.0: [1795834000.123, {..}]`), the line in the record's `log` (or
  `message`) field, its quotes and backslashes escaped and its control bytes as `\\xNN`.
"""

from __future__ import annotations

import json
import re

from stethoscope.logtext.dresses import CAST, LOGFMT, dressed  # dressed: how a dress is told by its head


def undressed(data: bytes) -> bytes | None:
    """The text a dressed log's records hold (None: `data` is not dressed)."""
    if CAST.match(data):
        return _cast_lines(data)
    if not dressed(data[:16384]):
        return None
    return _logfmt_lines(data) if LOGFMT.match(data) else _fluent_lines(data)


def _cast_lines(data: bytes) -> bytes:
    """The text a cast's output events printed, its `\\r\\n` line ends as `\\n` (input and resize events left out)."""
    out = []
    for line in data.splitlines()[1:]:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, list) and len(event) >= 3 and event[1] == "o" and isinstance(event[2], str):
            out.append(event[2])
    return "".join(out).replace("\r\n", "\n").encode("utf-8")


_GO_ESCAPE = re.compile(r'\\(?:([abfnrtv\\"\'])|x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8}))')
_GO_CHARS = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def _unquote(s: str) -> str:
    """A string as Go's strconv.Quote (or fluent-bit) escaped it, unescaped."""
    def one(m: re.Match[str]) -> str:
        if m[1]:
            return _GO_CHARS.get(m[1], m[1])
        return chr(int(m[2] or m[3] or m[4], 16))

    return _GO_ESCAPE.sub(one, s) if "\\" in s else s


_LOGFMT_LINE = re.compile(r'\s*time=\S+ level=\S+ msg=(?:"((?:[^"\\]|\\.)*)"|(\S*))(.*)')
_ATTR = re.compile(r'\s*([^\s=]+)=("(?:[^"\\]|\\.)*"|\S*)')


def _logfmt_lines(data: bytes) -> bytes:
    """Each logfmt line's message, then its attributes but those that are the same on every line."""
    lines = data.decode("utf-8", "replace").splitlines()
    parsed = [_LOGFMT_LINE.match(ln) for ln in lines]
    attrs = [_ATTR.findall(m[3]) if m else [] for m in parsed]
    worn = [set(a) for m, a in zip(parsed, attrs) if m]
    labels = set.intersection(*worn) if worn else set()
    out = []
    for line, m, pairs in zip(lines, parsed, attrs):
        if m is None:
            out.append(line)
            continue
        message = _unquote(m[1]) if m[1] is not None else m[2]
        rest = " ".join(f"{k}={v}" for k, v in pairs if (k, v) not in labels)
        out.append(f"{message} {rest}" if rest else message)
    return ("\n".join(out) + "\n").encode("utf-8")


_FLUENT_LINE = re.compile(r'\s*\[\d+\] [\w.\-]+: \[.*?\{"(?:log|message|msg)"=>"((?:[^"\\]|\\.)*)"')


def _fluent_lines(data: bytes) -> bytes:
    """Each fluent-bit record's printed line (a line that is no record is kept as it is)."""
    out = []
    for line in data.decode("utf-8", "replace").splitlines():
        m = _FLUENT_LINE.match(line)
        out.append(_unquote(m[1]) if m else line)
    return ("\n".join(out) + "\n").encode("utf-8")
