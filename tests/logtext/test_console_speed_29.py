"""Issue 28.4 (speed-29): two savings on a console log's read answer as before.

- The scanner's `columns` over lines given by their starts writes its rows into the bytes object it returns
  (their size is known: one row a start) and takes the starts as an int64 array in place (no `tobytes` copy):
  the same rows, the same None where a line does not read, as the starts given as bytes.
- A shape's `Template` compiles its MULTILINE regex (`findall`, for a run read by regex) on first use, not when
  the shape is learnt: where the scanner reads the runs it is never compiled; where it is used, the same rows.
"""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

from stethoscope.logtext import linescan
from stethoscope.logtext.console_reader import ConsoleReader

needs_scanner = pytest.mark.skipif(not linescan.available(), reason="the line scanner was not built")


def _keras(lines: int, seed: int) -> bytes:
    rng, out = random.Random(seed), []
    for s in range(1, lines + 1):
        n = s % 1000 + 1
        bar = "=" * (n * 30 // 1000 - 1) + (">" if n < 1000 else "=")
        tail = f"- ETA: {(1000 - n) // 50}s" if n < 1000 else "- 20s 20ms/step"
        out.append(f"{n:4d}/1000 [{bar:.<30}] {tail} - loss: {2 + rng.random():.4f} - accuracy: {rng.random():.4f}\n")
    return "".join(out).encode()


@needs_scanner
def test_columns_by_starts_read_the_same_rows_from_an_array_as_from_bytes() -> None:
    from stethoscope.logtext import _linescan

    data = _keras(3000, 1)
    starts = np.concatenate(([0], np.flatnonzero(np.frombuffer(data, np.uint8) == 10)[:-1] + 1)).astype(np.int64)
    picked = [(w, [0, w - 3, w - 1]) for w in range(4, 20)]  # the token count is found by trying: others give None
    tried = 0
    for width, picks in picked:
        for chosen in (starts[10:100], starts[100:1000:7], starts[:0], starts[-5:]):
            args = (width, np.array(picks, np.int32).tobytes(), b"iff", bytes(3))
            as_bytes = _linescan.columns(data, *args, chosen.tobytes())
            in_place = _linescan.columns(data, *args, np.ascontiguousarray(chosen))  # (the wrapper makes it so)
            assert in_place == as_bytes
            wrapped = linescan.columns(data, width, picks, "iff", [False] * 3, chosen)  # a strided view: in place
            assert (wrapped is None) == (as_bytes is None) and (wrapped is None or wrapped.tobytes() == as_bytes[1])
            tried += as_bytes is not None and chosen.size > 0
    assert tried  # some width read the lines (the others give None alike)
    # no picks: rows of no values, one per start
    assert _linescan.columns(data, 12, b"", b"", b"", starts[:5]) == _linescan.columns(data, 12, b"", b"", b"",
                                                                                       starts[:5].tobytes())
    # the wrapper's halves (two threads over the starts) give the rows the one call gives
    many = np.resize(starts[1:999], linescan.HALVES_LINES + 11)
    width, picks = next((w, p) for w, p in picked if _linescan.columns(data, w, np.array(p, np.int32).tobytes(),
                                                                         b"iff", bytes(3), starts[1:3]) is not None)
    both = linescan.columns(data, width, picks, "iff", [False] * 3, many)
    one = _linescan.columns(data, width, np.array(picks, np.int32).tobytes(), b"iff", bytes(3), many.tobytes())
    assert both is not None and both.tobytes() == one[1] and both.shape == (many.size, 3)


def test_a_templates_run_regex_is_compiled_when_first_used_and_reads_the_same_rows() -> None:
    from stethoscope.logtext.console_fast import Template

    reader = ConsoleReader("log")
    reader.line(1, b"step 10 loss 2.5 lr 0.001")
    templates = [shape.template for shape in reader.templates.values() if shape.template is not None]
    assert len(templates) == 1 and isinstance(templates[0], Template)
    template = templates[0]
    assert template._findall is None  # learnt (its line read back by `match`), the run regex not compiled yet
    block = [b"step 13 loss 2.2 lr 0.001", b"step 14 loss 2.1 lr 0.002"]
    rows = template.rows(block)
    assert template._findall is not None
    assert rows == re.compile(template._pattern, re.MULTILINE).findall(b"\n".join(block)) and len(rows) == 2
    assert template.rows([b"step 15 loss 2.0 lr 0.001", b"something else"]) is None
