"""A big `trainer_state.json`'s `log_history` read as columns by pyarrow's JSON reader.

orjson parses a million rows in about a second, and then a million dicts must be walked, checked and
freed in Python, which costs more than the parse. pyarrow reads the rows straight into typed columns,
in C++ and on every core. It is used only where its columns say exactly what the dicts would:

* the history is one array of flat objects (no `[`, no nested `{`, no `null` inside it), every two of
  them separated the same way (as `json.dumps` writes them, with or without the Trainer's `indent=2`);
* every column pyarrow makes is int64 or float64 (a string, a bool or an integer beyond 64 bits sends the
  file back to the dict path), `step` an int64 one. Bare NaN and Infinity, which Python's json writes and
  orjson refuses, pyarrow reads as json does.

Rows without a value in a column did not have that key: rows that share their set of keys form spans,
and `hf.py` lays a span out as columns where its per-row rules cannot apply (it checks the same
conditions as for dicts); any other row (an eval row repeating the step, a summary, a row without a
step) is cut from the text and parsed by orjson, the very dict the other path would have made.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

try:
    import orjson
except ImportError:
    orjson = None

MIN_BYTES = 8 << 20  # below this, importing pyarrow (~0.2 s) costs more than it saves
_BLOCK = 16 << 20  # pyarrow's parse blocks (its default 1 MB makes a hundred chunks of a 100 MB history)
_KEY = b'"log_history": ['
_NEWLINE_TO_SPACE = bytes.maketrans(b"\n\r", b"  ")


class History:
    """The history's rows as columns: `steps` (int64; rows without a step are left to orjson), per key
    a float64 array and where it is present, and each row's text for the rows read as dicts."""

    def __init__(self, text: bytes, start: int, end: int, table: Any) -> None:
        import numpy as np

        self._text, self._start, self._end = text, start, end
        self.rows = table.num_rows
        self.keys: list[str] = list(table.column_names)
        self.values: dict[str, np.ndarray] = {}
        self.present: dict[str, np.ndarray | None] = {}  # None: in every row
        for key in self.keys:
            column = table.column(key).combine_chunks()
            self.present[key] = None if column.null_count == 0 else column.is_valid().to_numpy(zero_copy_only=False)
            if column.null_count:
                column = column.fill_null(0)
            self.values[key] = column.to_numpy().astype(np.float64, copy=False)
        self.steps = table.column("step").combine_chunks().fill_null(0).to_numpy()
        # a bare NaN or Infinity (Python's json writes them, pyarrow reads them): orjson refuses the file and
        # json reads it on the other path, and so json reads its rows here
        self.nonfinite = not all(np.isfinite(v).all() for v in self.values.values())
        self._loads = json.loads if self.nonfinite else orjson.loads
        self._starts: np.ndarray | None = None

    def spans(self) -> Iterator[tuple[int, int, tuple[str, ...]]]:
        """(start, stop, keys) of each run of rows with the same set of keys, in order."""
        import numpy as np

        sparse = [key for key in self.keys if self.present[key] is not None]
        if not sparse:
            yield 0, self.rows, tuple(self.keys)
            return
        cuts = np.zeros(0, np.int64)
        for key in sparse:
            mask = self.present[key]
            cuts = np.union1d(cuts, np.flatnonzero(mask[1:] != mask[:-1]) + 1)
        bounds = [0, *cuts.tolist(), self.rows]
        for start, stop in zip(bounds[:-1], bounds[1:]):
            yield start, stop, tuple(k for k in self.keys if self.present[k] is None or self.present[k][start])

    def dicts(self, start: int, stop: int) -> list[Any]:
        """Rows start..stop as orjson (or json) parses them from the file's own text."""
        import numpy as np

        if self._starts is None:
            text = np.frombuffer(self._text, np.uint8, self._end - self._start, self._start)
            self._starts = np.append(np.flatnonzero(text == ord("{")), self._end - self._start) + self._start
        return [self._loads(self._text[self._starts[i]: self._starts[i + 1]].rstrip())
                for i in range(start, stop)]


def split(data: bytes) -> tuple[dict[str, Any], History] | None:
    """(the state without its history, the history as columns), or None where the dict path must read
    the file (see the module docstring)."""
    if orjson is None or len(data) < MIN_BYTES or data.count(_KEY) != 1:
        return None
    start = data.index(_KEY) + len(_KEY)
    end = data.find(b"]", start)
    if end < 0 or data.find(b"[", start, end) >= 0 or data.find(b"null", start, end) >= 0:
        return None
    try:
        state = orjson.loads(data[:start] + data[end:])
    except orjson.JSONDecodeError:
        return None
    if not isinstance(state, dict) or state.get("log_history") != []:
        return None
    history = _history(data, start, end)
    if history is None:
        return None
    del state["log_history"]
    return state, history


def _history(data: bytes, start: int, end: int) -> History | None:
    try:
        import pyarrow as pa
        import pyarrow.json as pa_json
    except ImportError:  # an optional extra: without it the dicts it is
        return None
    opened = data.count(b"{", start, end)
    text = data.translate(_NEWLINE_TO_SPACE) if data.find(b"\n", start, end) >= 0 else data  # indent=2 rows
    first = text.find(b"}", start, end)
    separator = text[first: text.find(b"{", first, end) + 1]
    if opened < 2 or separator[1:-1].strip() != b",":
        return None
    # One object per line, as pyarrow reads them fastest: raw newlines are only ever whitespace in JSON, and
    # the separator between two objects becomes a line end. The text keeps its length (what changes outside
    # the history is never read); a separator written otherwise leaves two objects on a line: refused.
    text = text.replace(separator, b"}\n" + b" " * (len(separator) - 3) + b"{")
    rows = pa.py_buffer(text)[start:end]
    try:
        table = pa_json.read_json(pa.BufferReader(rows), read_options=pa_json.ReadOptions(block_size=_BLOCK))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # damage, 1e999: json's job
        return None
    if table.num_rows != opened or "step" not in table.column_names:  # a nested object: not a flat row
        return None
    if not all(pa.types.is_int64(t) or pa.types.is_float64(t) for t in table.schema.types):
        return None
    if not pa.types.is_int64(table.schema.field("step").type):
        return None
    history = History(text, start, end, table)
    if history.nonfinite and data.find(b"-NaN", start, end) >= 0:  # pyarrow reads -NaN; json does not
        return None
    return history
