"""The fast path of the Megatron importer: one literal regex per record shape.

Once the general parser has read a record, its exact shape (keys in order, units, the global batch
size) is compiled into a regex that only matches lines the general parser would read into the same
points: same keys, same batch size, zero skipped/nan counts, a non-zero grad norm. Whole chunks of
the file are then matched at once (`findall`, C speed) when every line in them is such a record or
a bare `time (ms)`/empty line, their values parsed as one JSON array by orjson and appended straight
to the run's columns; any other chunk goes line by line. tests/importers/test_megatron.py reads every
case both ways and compares. On a 1M-line log `findall` is about half of the import; the rest is
reading, number parsing and building the columns.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from itertools import chain, compress
from operator import itemgetter
from typing import TYPE_CHECKING, Any, BinaryIO

from stethoscope.importers.megatron_fields import COUNTER_KEYS, GLOBAL_BATCH_KEY, field_name, number
from stethoscope.logtext.table import Layout

if TYPE_CHECKING:
    import numpy as np

    from stethoscope.logtext.coded import CodedColumns, RowBlock

try:
    import orjson
except ImportError:  # a core dependency; without it float() parses every value
    orjson = None

_NUMBER_TYPES = frozenset((float, int))
STAMPED = "[stamped]"  # the value text of an `iteration` field that carried Megatron-LM's timestamp
CHUNK_BYTES = 256 * 1024  # small enough that a chunk with one odd line wastes little
_PREFIX = rb"(?:\[(?:default|rank)?\d+\]:|\[\d+,\d+\]<std(?:out|err)>:)? ?"
_VALUE = rb"([^ |\n]+)"
# Lines a chunk may hold besides records and still be read at once: they carry nothing.
_SKIPPABLE = _PREFIX + rb"(?:time \(ms\))?[ \t\r]*"
_NEG_ZERO = re.compile(rb"-0(?![0-9.eE])").search  # `-0` as a JSON int (also matches `1e-0,`: float() then)


class Template:
    """A regex for one record shape: `match` for one line, `findall` for a chunk (one tuple per line,
    with an empty step for a skippable line), and where the step and the values are in the groups."""

    def __init__(self, record: bytes, layout: Layout, roles: list[str]) -> None:
        self.match: Callable[[bytes], re.Match[bytes] | None] = re.compile(record + rb"[ \t\r]*\n?$").match
        self.findall = re.compile(rb"^(?:" + record + rb"[ \t\r]*|" + _SKIPPABLE + rb")$", re.MULTILINE).findall
        self.layout = layout
        self.step = roles.index("step") + 1
        self.time = roles.index("time") + 1 if "time" in roles else 0
        self.groups = tuple(i + 1 for i, role in enumerate(roles) if role == "value")
        self.step_at = self.step - 1
        self.time_at = self.time - 1 if self.time else None
        self.value_at = tuple(g - 1 for g in self.groups)

    def coded(self, rows: list[tuple[bytes, ...]], time_of: Callable[[bytes], float]) -> RowBlock | CodedColumns | None:
        """The points of a chunk's `findall` rows as arrays (what PointTable.add_block and build_columns
        make of them, while the chunk is in the CPU cache), a RowBlock that `join` lays out; None when a
        value is not a number or a step does not fit in 64 bits (PointTable then reads and names it)."""
        import numpy as np  # loaded when a log is read, not when the package is imported

        from stethoscope.logtext.coded import CodedColumns, RowBlock

        kept = list(compress(rows, map(itemgetter(self.step_at), rows)))  # a skippable line has no step
        if not kept:
            return CodedColumns([], np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0))
        table = self._table(kept)
        if table is not None:  # the common case: every group a JSON number, parsed in one call
            steps, values = table[:, self.step_at].astype(np.int64), table[:, list(self.value_at)]
            times = None
        else:
            groups = list(zip(*kept))  # one tuple per regex group
            try:
                values = np.array(floats([text for at in self.value_at for text in groups[at]]), dtype=np.float64)
                steps = np.array(ints(groups[self.step_at]), dtype=np.int64)
            except (ValueError, OverflowError):
                return None
            values = values.reshape(len(self.layout.names), len(kept)).T
            times = None if self.time_at is None else list(map(time_of, groups[self.time_at]))
        if self.layout.scales:
            values = values * np.array(self.layout.scales)
        return RowBlock(self.layout.names, steps, [values[:, at] for at in range(values.shape[1])],
                        None if times is None else np.array(times, dtype=np.float64))

    def _table(self, rows: list[tuple[bytes, ...]]) -> np.ndarray | None:
        """The rows' groups as a (rows x groups) float array when there is no timestamp and orjson reads
        every group as one number (as `floats`/`ints` would, steps below 2**53 so they stay exact);
        None otherwise."""
        import numpy as np

        if self.time_at is not None:
            return None
        width = len(rows[0])
        parsed, kinds = _json_numbers(list(chain.from_iterable(rows)))
        if not kinds or not kinds <= _NUMBER_TYPES:
            return None
        table = np.array(parsed, dtype=np.float64).reshape(len(rows), width)  # ints converted as float() does
        return table if bool(np.all(table[:, self.step_at] < 2.0**53)) else None


def floats(texts: Sequence[bytes]) -> list[float]:
    """`float()` of each text (ValueError when one is not a number). Where every text is a JSON number
    orjson parses them all at once, ~3x faster and to the same doubles (both round correctly;
    tests/importers/test_megatron.py compares them); `-0`, which it reads as the int 0, is left to float()."""
    parsed, kinds = _json_numbers(texts)
    if kinds == {float}:
        return parsed
    return list(map(float, parsed if kinds and kinds <= {float, int} else texts))


def ints(texts: Sequence[bytes]) -> list[int]:
    """`int()` of each text (ValueError when one is not an integer), through orjson where it can."""
    parsed, kinds = _json_numbers(texts)
    return parsed if kinds == {int} else list(map(int, texts))


def _json_numbers(texts: Sequence[bytes]) -> tuple[list[Any], set[type]]:
    """The texts parsed as one JSON array by orjson and the types it gave; ([], set()) unless that is
    one value per text (a text holding `,` or `[` gives more or fewer values, or a list)."""
    if orjson is None or not texts:
        return [], set()
    joined = b"[" + b",".join(texts) + b"]"
    if _NEG_ZERO(joined):
        return [], set()
    try:
        parsed = orjson.loads(joined)
    except orjson.JSONDecodeError:  # nan, +1, .5, 007, 1e999, a stray character: float()/int() decide
        return [], set()
    return (parsed, set(map(type, parsed))) if len(parsed) == len(texts) else ([], set())


def shape(fields: list[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """What makes two records share a template: their keys, units and global batch size."""
    return tuple((key, _shape(key, text)) for key, text in fields)


def _shape(key: str, text: str) -> str:
    if key.lower() == GLOBAL_BATCH_KEY or key == "iteration":
        return text.strip()
    parsed = number(text)
    return "?" if parsed is None else parsed[1]


def compile_template(fields: list[tuple[str, str]]) -> Template:
    """The template of a record read by the general parser, from its (key, value text) fields."""
    names: list[str] = []
    scales: list[float] = []
    roles: list[str] = []
    parts = [_field(key, text, names, scales, roles) for key, text in fields]
    layout = Layout(tuple(names), tuple(scales) if any(s != 1.0 for s in scales) else None)
    return Template(_PREFIX + b" *" + b" ".join(parts), layout, roles)


def _field(key: str, text: str, names: list[str], scales: list[float], roles: list[str]) -> bytes:
    if key == "iteration":
        stamp = b""
        if text == STAMPED:
            roles.append("time")
            stamp = rb"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d{1,6})?)\] *"
        roles.append("step")
        return stamp + rb"iteration +(\d+)/ *\d+ \|"
    lower = key.lower()
    label = re.escape(key.encode()) + b":"
    parsed = number(text)
    if lower == GLOBAL_BATCH_KEY:
        return label + b" *" + re.escape(text.strip().encode()) + rb" \|"
    if lower in COUNTER_KEYS:
        return label + rb" *0 \|"
    name, scale = field_name(lower, parsed[1]) if parsed else (None, 1.0)
    if name is None or parsed is None:
        return label + rb"[^|\n]*\|"
    names.append(name)
    scales.append(scale)
    roles.append("value")
    if lower == "grad norm":  # a zero norm takes the general path: it may be a pipeline-parallel artefact
        return label + rb" *(?!0\.?0* \|)" + _VALUE + rb" \|"
    if parsed[1]:
        return label + rb" *([-+.0-9eE]+)" + re.escape(parsed[1].encode()) + rb" \|"
    return label + rb" *" + _VALUE + rb" \|"


def chunks(stream: BinaryIO, size: int = CHUNK_BYTES) -> Iterator[bytes]:
    """The stream in pieces of about `size` bytes that end at a line end (the last may not)."""
    while data := stream.read(size):
        yield data if data.endswith(b"\n") else data + stream.readline()


def line_count(chunk: bytes, newlines: int) -> int:
    """How many lines a chunk holds, given how many newlines."""
    return newlines + (0 if chunk.endswith(b"\n") else 1)
