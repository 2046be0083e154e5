"""The fastest path of the console reader: a run of lines of one shape read as one list of tokens.

Every byte that cannot be part of a number (letters other than e/E, punctuation, ANSI leftovers, bar
characters) becomes a blank: `bytes.translate`, then `split()`, both at C speed. Lines of one shape (the
same text once digits are removed) give the same number of tokens at the same places, so a column is a
slice `tokens[i::width]`. A plan is made from the first line of a shape, checked against what the full
parser read from it; a run whose token count is off, or a column that is not all numbers, goes to the
regex path instead (`console_fast.Template`).

Where the native line scanner was built (`linescan.py`), `read_raw` reads the same tokens from the raw
lines in C, without a Python object per token (`_linescan.columns`), into arrays; what it cannot read
the same way (a token count that differs on a line, a token that float() or int() would refuse) it
leaves to this module's path.
"""

from __future__ import annotations

import re
from itertools import compress, repeat
from operator import add, mul
from typing import Any, NamedTuple

from stethoscope.logtext.console_line import ANSI, NUMBER, Line
from stethoscope.logtext.loglines import stamp_seconds
from stethoscope.logtext.table import Layout

try:
    import orjson
except ImportError:  # a declared dependency; float() does the same work, slower
    orjson = None  # type: ignore[assignment]

_KEEP = b"0123456789.+-eE,\n"
TOKENS = bytes(c if c in _KEEP else 32 for c in range(256))
_NO_COMMA = TOKENS.replace(b",", b" ")


def number_text(raw: bytes) -> bytes:
    """`raw` (lines of one shape) with every byte that cannot be part of a number a blank (`TOKENS`), and a
    comma that a blank follows too (`'loss': 2.3, 'lr': …`, `lr=[0.1, 0.1]`): a comma inside a number
    (`15,723`) never has one, so the tokens of dicts and lists are plain numbers, parsed without a pass to
    drop commas. Lines of one shape have such commas at the same places: the first line tells, and when
    it has no other comma, one translate blanks them all (`_NO_COMMA`)."""
    end = raw.find(b"\n")
    first = (raw if end < 0 else raw[:end]).translate(TOKENS)
    if b", " not in first:
        return raw.translate(TOKENS)
    if b"," not in first.replace(b", ", b"  "):
        return raw.translate(_NO_COMMA)
    return raw.translate(TOKENS).replace(b", ", b"  ")


_SPANS = re.compile(rb"\S+")
_LAUNCHER_RANK = re.compile(r"\s*\[(?:default|rank)?(\d+)\]:|\s*\[\d+,(\d+)\]<std")


class Plan(NamedTuple):
    """Where a shape's step, values, rank and timestamp (date, then hour, minute, second) are among its tokens."""

    width: int
    step: int | None
    values: tuple[int, ...]
    scales: tuple[float, ...]
    rank: int | None
    time: int | None
    commas: frozenset[int] = frozenset()  # token indices with a comma (the shape fixes where commas are)
    decimals: frozenset[int] = frozenset()  # token indices written with a point or an exponent (never ints)


class Read(NamedTuple):
    """The columns of a run: steps (None when the lines carry none), values per name, times, kept rows."""

    steps: list[int] | None
    values: list[list[float]]
    times: list[float] | None
    kept: int
    ranks: frozenset[bytes] = frozenset()
    keep: Any = None  # which lines were kept (a list or array of bools), None: every line
    rows: int = 0  # the lines read


def plan(raw: bytes, step: int | None, values: list[tuple[int, str]], scales: tuple[float, ...],
         rank: int | None, time: int | None) -> Plan | None:
    """The plan of a line given the byte offsets of its step, values (with their text), rank digit and date;
    None when a token does not hold exactly the number the parser read."""
    spans = [m.span() for m in _SPANS.finditer(number_text(raw))]
    tokens = [raw[a:b].translate(TOKENS).strip() for a, b in spans]

    def index(offset: int | None) -> int | None:
        return None if offset is None else next((i for i, (a, b) in enumerate(spans) if a <= offset < b), -1)

    at = [index(offset) for offset, _ in values]
    if -1 in at or index(step) == -1 or index(rank) == -1 or index(time) == -1:
        return None
    if any(tokens[i].replace(b",", b"").decode() != text.replace(",", "") for i, (_, text) in zip(at, values)):
        return None
    commas = frozenset(i for i, token in enumerate(tokens) if b"," in token)
    decimals = frozenset(i for i, token in enumerate(tokens) if re.search(rb"\d[.eE]", token))
    return Plan(len(spans), index(step), tuple(at), scales, index(rank), index(time),  # type: ignore[arg-type]
                commas, decimals)


def read(p: Plan, tokens: list[bytes], lines: int, keep_rank: bytes | None) -> Read | None:
    """The columns of `lines` lines' `tokens`; None when they do not fit the plan."""
    w = p.width
    if len(tokens) != w * lines:
        return None
    keep = None
    ranks: frozenset[bytes] = frozenset()
    if p.rank is not None and keep_rank is not None:
        column = tokens[p.rank::w]
        if p.rank in p.commas:  # mpirun's [1,0]: the local rank is the second number
            column = [r.rsplit(b",", 1)[-1] for r in column]
        keep = list(map(keep_rank.__eq__, column))
        ranks = frozenset(column)
        if all(keep):
            keep = None
    try:
        steps = None if p.step is None else list(map(int, _plain(tokens[p.step::w], p.step in p.commas)))
        values = [_scaled(_floats(_plain(tokens[i::w], i in p.commas), i in p.decimals), s)
                  for i, s in zip(p.values, p.scales)]
        times = None if p.time is None else _times(tokens, p.time, w)
    except ValueError:
        return None
    if keep is not None:
        steps = None if steps is None else list(compress(steps, keep))
        values = [list(compress(v, keep)) for v in values]
        times = None if times is None else list(compress(times, keep))
    return Read(steps, values, times, lines if keep is None else sum(keep), ranks, keep, lines)


def read_raw(p: Plan, raw: bytes, lines: int | None, keep_rank: bytes | None, starts: Any = None) -> Read | None:
    """`read` of the lines `raw` (each ending in a newline; lines None: as many as it holds), by the native
    scanner into arrays where it was built, else by `number_text(raw).split()` into lists. With `starts`
    (where the lines to read start in `raw`, a numpy array), the native scanner's read only (None without)."""
    from stethoscope.logtext import linescan

    got = _native(p, raw, lines, keep_rank, starts) if linescan.available() else None
    if got is not None or starts is not None:
        return got
    raw = bytes(raw)  # a memoryview of the log's data: the token lists need bytes
    if lines is None:
        lines = raw.count(b"\n") + (0 if raw.endswith(b"\n") else 1)
    return read(p, number_text(raw).split(), lines, keep_rank)


def _native(p: Plan, raw: bytes, lines: int | None, keep_rank: bytes | None, starts: Any = None) -> Read | None:
    from stethoscope.logtext.linescan import columns

    picks = native_picks(p, keep_rank)
    if picks is None:
        return None
    got = columns(raw, p.width, *picks, starts)
    if got is None or (lines is not None and got.shape[0] != lines):
        return None
    return from_columns(p, got, picks[0], keep_rank)


def native_picks(p: Plan, keep_rank: bytes | None) -> tuple[list[int], str, list[bool]] | None:
    """The tokens the native scanner's `columns` reads for plan `p`, how (`kinds`) and which have commas;
    None when the token lists must decide (a rank kept that is not plain digits, a token read two ways)."""
    ranked = p.rank is not None and keep_rank is not None
    if ranked and not (keep_rank.isdigit() and (keep_rank == b"0" or not keep_rank.startswith(b"0"))):  # type: ignore[union-attr]
        return None
    picks: dict[int, str] = {}
    wanted = [(p.step, "i"), *((v, "f") for v in p.values), ((p.rank if ranked else None), "r")]
    if p.time is not None:
        wanted += [(p.time, "d"), (p.time + 1, "h"), (p.time + 2, "m"), (p.time + 3, "s")]
    for token, kind in wanted:
        if token is not None and picks.setdefault(token, kind) != kind:
            return None  # one token read two ways: the token lists decide
    order = list(picks)
    return order, "".join(picks.values()), [token in p.commas for token in order]


def from_columns(p: Plan, got: Any, order: list[int], keep_rank: bytes | None) -> Read:
    """The Read of plan `p` from the scanner's columns `got` (rows x tokens `order`, `native_picks`)."""
    import numpy as np

    col = {token: got[:, k] for k, token in enumerate(order)}
    steps = None if p.step is None else col[p.step].astype(np.int64)
    values = [col[v] if s == 1.0 else col[v] * s for v, s in zip(p.values, p.scales)]
    times = None
    if p.time is not None:
        days, hours, minutes = (col[p.time + k].astype(np.int64) for k in range(3))
        times = (((days * 24 + hours) * 60 + minutes) * 60).astype(np.float64) + col[p.time + 3]
    keep = None
    ranks: frozenset[bytes] = frozenset()
    if p.rank is not None and keep_rank is not None:
        rank = col[p.rank].astype(np.int64)
        ranks = frozenset(str(r).encode() for r in np.unique(rank).tolist())
        keep = rank == int(keep_rank)
        if keep.all():
            keep = None
        else:
            steps = None if steps is None else steps[keep]
            values = [v[keep] for v in values]
            times = None if times is None else times[keep]
    rows = got.shape[0]
    return Read(steps, values, times, rows if keep is None else int(np.count_nonzero(keep)), ranks, keep, rows)


def _plain(column: list[bytes], commas: bool) -> list[bytes]:
    """`column` without commas (thousands separators, a `2.3,` before the next key) when it has them."""
    return list(map(bytes.replace, column, repeat(b","), repeat(b""))) if commas else column


def _floats(column: list[bytes], decimals: bool) -> list[float]:
    """The column as floats: one orjson parse of the whole column where every token has a point or an
    exponent (JSON then gives floats, the same doubles as float()), else float() per token."""
    if decimals and orjson is not None:
        try:
            return orjson.loads(b"[" + b",".join(column) + b"]")  # type: ignore[no-any-return]
        except orjson.JSONDecodeError:  # a leading zero or `+`, `.5`, `5.`: not JSON numbers
            pass
    return list(map(float, column))


def _scaled(column: list[float], scale: float) -> list[float]:
    return column if scale == 1.0 else list(map(mul, column, repeat(scale)))


class _Minutes(dict):  # type: ignore[type-arg]
    def __missing__(self, minute: bytes) -> float:  # b"YYYY-MM-DD" + b"HH" + b"MM"
        self[minute] = value = stamp_seconds(minute[:10] + b" " + minute[10:12] + b":" + minute[12:14] + b":00")
        return value


def _times(tokens: list[bytes], at: int, w: int) -> list[float]:
    """Unix seconds from the date, hour, minute and second tokens (as `stamp_seconds` reads them)."""
    minutes = map(bytes.__add__, map(bytes.__add__, tokens[at::w], tokens[at + 1::w]), tokens[at + 2::w])
    seconds = map(float, map(bytes.replace, tokens[at + 3::w], repeat(b","), repeat(b".")))
    return list(map(add, map(_Minutes().__getitem__, minutes), seconds))


def plan_of(text: str, original: str, line: Line, layout: Layout, values: list[Any]) -> Plan | None:
    """The plan of a line the full parser read into `values` (from `text`, which is `original` without its
    ANSI codes), checked by reading the line back with it."""
    starts = [m.start() for m in NUMBER.finditer(text)]
    launcher = _LAUNCHER_RANK.match(text) if line.rank is not None else None
    if line.rank is not None and launcher is None:
        return None
    rank = None if launcher is None else launcher.start(1 if launcher.group(1) else 2)
    step = None if line.step_token is None else starts[line.step_token]
    time = None if line.time is None or line.time_token is None else starts[line.time_token]
    where = _in_bytes(original, [step, rank, time, *(starts[v.token] for v in values)])
    raw = original.encode()
    found = plan(raw, where[0], list(zip(where[3:], (v.text for v in values))),  # type: ignore[arg-type]
                 layout.scales or (1.0,) * len(values), where[1], where[2])
    if found is None or time is None:
        return found
    check = read(found, number_text(raw).split(), 1, None)
    return found if check is not None and check.times == [line.time] else None


def _in_bytes(original: str, positions: list[int | None]) -> list[int | None]:
    """Character positions in `original` without its ANSI codes → byte offsets in `original`."""
    codes = [m.span() for m in ANSI.finditer(original)] if "\x1b" in original else []
    out: list[int | None] = []
    for at in positions:
        if at is None:
            out.append(None)
            continue
        removed = 0
        for a, b in codes:
            if a - removed > at:
                break
            removed += b - a
        out.append(len(original[:at + removed].encode()))
    return out
