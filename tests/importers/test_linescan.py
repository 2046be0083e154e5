"""The native line scanner against a plain-Python statement of what it reads (`_reference`)."""

from __future__ import annotations

import io
import math
import random
import re
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stethoscope.logtext import linescan

built = pytest.mark.skipif(not linescan.available(), reason="the line scanner was not built (no C compiler)")

_NUMBER = re.compile(rb"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_WORD = frozenset(b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_.")


def _reference(line: bytes) -> tuple[bytes, list[float], list[int]]:
    """(shape, numbers, where each starts) of one line, as the module docstring of _linescan.c says:
    a number starts where the byte before is not part of a word; blanks are left out of the shape."""
    shape, numbers, starts = bytearray(), [], []
    i, in_word = 0, False
    while i < len(line):
        c = line[i]
        if c in b" \t\r":
            i, in_word = i + 1, False
            continue
        m = _NUMBER.match(line, i) if not in_word else None
        if m and len(m.group()) <= 63:
            text = m.group()
            numbers.append(float(text))
            starts.append(i)
            shape.append(1 if text.isdigit() else 2)
            i, in_word = m.end(), True
            continue
        shape.append(c)
        i, in_word = i + 1, c in _WORD
    return bytes(shape), numbers, starts


def _same_floats(got: list[float], want: list[float]) -> bool:
    return [(v, math.copysign(1, v)) for v in got] == [(v, math.copysign(1, v)) for v in want]


@built
@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(
    st.sampled_from([" ", "  ", "\t", "|", ":", "=", ",", "/", "(", ")", "[", "]", "%", "e", "E", "-", "+", ".", "_",
                     "loss", "lr", "A100", "fp16", "rank0", "GiB", "ms", "iteration", "nan", "x1e5"]),
    st.integers(-10**20, 10**20).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda x: f"{x!r}"),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda x: f"{x:.6E}"),
    st.floats(min_value=-1e6, max_value=1e6).map(lambda x: f"{x:.3f}"),
), max_size=30).map("".join))
def test_a_line_reads_as_the_reference_says(text: str) -> None:
    line = text.encode().replace(b"\n", b" ")
    got = linescan.scan(line, offsets=True)
    shape, numbers, starts = _reference(line)
    assert len(got) == (1 if line else 0)
    if line:
        assert int(got.counts[0]) == len(numbers)
        assert _same_floats(got.values.tolist(), numbers)
        assert got.number_starts.tolist() == starts
        # same shape <=> same hash: a line built from the shape with other numbers and padding agrees
        twin = line.replace(b" ", b"  ")
        assert linescan.shape_hash(twin) == int(got.hashes[0])
        assert _reference(twin)[0] == shape


@built
def test_every_number_is_the_double_float_gives() -> None:
    rng = random.Random(1)
    texts = [b"-0", b"-0.0", b"0", b"1e-400", b"4.9e-324", b"2.2250738585072011e-308", b"9007199254740993",
             b"123456789012345678901234567890", b"1.00000000000000011102230246251565404236316680908203125",
             b"6.009562E+00", b"3.000E-04", b"65536.0", b"1E+05", b"1e999", b"007", b".5", b"1.", b"+3",
             b"0.000000000000000000001", b"123456789012345.6", b"1234567890123456.7"]
    for _ in range(50000):
        x = struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0]
        if math.isfinite(x):
            texts.append((rng.choice(["%r", "%.3e", "%.6E", "%.17g", "%.12g", "%.1f", "%.8f"]) % x).encode())
    texts = [t for t in texts if len(t) <= 63]
    got = linescan.scan(b"\n".join(texts))
    assert got.counts.tolist() == [1] * len(texts)
    assert _same_floats(got.values.tolist(), [float(t) for t in texts])


@built
def test_lines_starts_and_shapes() -> None:
    got = linescan.scan(b"step 1 | loss 2.5\nstep 22 | loss 0.25\n\nstep 3 | loss 1e-3\nlast 7")
    assert got.starts.tolist() == [0, 18, 38, 39, 58]
    assert got.counts.tolist() == [2, 2, 0, 2, 1]
    assert got.first.tolist() == [0, 2, 4, 4, 6]
    assert got.values.tolist() == [1, 2.5, 22, 0.25, 3, 1e-3, 7]
    hashes = got.hashes.tolist()
    assert hashes[0] == hashes[1] == hashes[3] and len(set(hashes)) == 3
    # a number glued to a word is text; a unit after a number is text; the kind of number is in the shape
    assert linescan.scan(b"A100 fp16 rank0 0.33GiB(1.41%) 45.6ms").values.tolist() == [0.33, 1.41, 45.6]
    assert linescan.shape_hash(b"loss 2") != linescan.shape_hash(b"loss 2.0")
    assert linescan.shape_hash(b"loss 2") != linescan.shape_hash(b"lr 2")


@built
def test_line_starts_and_skips_agree_with_splitting() -> None:
    """The memchr walk over newlines against the positions a plain search gives, on random texts with and
    without a last newline, from any offset, asking for fewer, as many and more lines than there are."""
    rng = random.Random(3)
    for _ in range(3000):
        text = bytes(rng.choice(b"ab\n") for _ in range(rng.randint(0, 40)))
        start = rng.randint(0, len(text))
        count = rng.randint(0, 15)
        ends = [i + 1 for i in range(start, len(text)) if text[i] == 10][:count]
        assert linescan.line_starts(text, start, count).tolist() == [start, *ends]
        assert linescan.skip_lines(text, start, count) == (len(ends), ends[-1] if ends else start)


@built
def test_rows_of_several_lines_read_as_their_lines_do() -> None:
    """A cycle of three line shapes read as rows of three lines (`per_row`) gives each line's columns side
    by side, as reading each shape's lines alone does; a row cut short by the end of the data, or a line
    with a token too many, gives None."""
    import numpy as np

    rng = random.Random(5)
    lines = []
    for b in range(1, 200):
        lines += [f"[batch={b}/9000]:", f"\t loss: {rng.random():.5f}", f"\t lr: {rng.random() * 1e-3:.3e}"]
    data = ("\n".join(lines) + "\n").encode()
    got = linescan.columns(data, 4, [0, 1, 2, 3], "iiff", [False] * 4, None, 3)
    starts = np.array([0] + [i + 1 for i, c in enumerate(data) if c == 10][:-1], np.int64)
    alone = [linescan.columns(data, 2, [0, 1], "ii", [False] * 2, starts[0::3]),
             linescan.columns(data, 1, [0], "f", [False], starts[1::3]),
             linescan.columns(data, 1, [0], "f", [False], starts[2::3])]
    assert got is not None and np.array_equal(got, np.hstack(alone)) and got.shape == (199, 4)
    assert linescan.columns(data[: starts[-2]], 4, [0, 1, 2, 3], "iiff", [False] * 4, None, 3) is None
    assert linescan.columns(data.replace(b"loss: ", b"loss: 1 ", 1), 4, [0, 1, 2, 3], "iiff", [False] * 4, None, 3) is None


@built
def test_line_kinds_number_lines_as_a_dict_would() -> None:
    """Distinct lines numbered in the order they first appear, as `dict.setdefault` over `split` does:
    random texts of few kinds, and thousands of kinds (the table grows), from any start to any end."""
    rng = random.Random(4)
    texts = [bytes(rng.choice(b"ab\n") for _ in range(rng.randint(0, 30))) for _ in range(3000)]
    texts.append(b"\n".join(b"line %d" % rng.randrange(5000) for _ in range(20000)))
    for text in texts:
        start = rng.randint(0, len(text))
        end = rng.randint(start, len(text))
        ids, starts, kinds = linescan.line_kinds(text, start, end)
        lines = text[start:end].split(b"\n")
        index: dict[bytes, int] = {}
        assert ids.tolist() == [index.setdefault(line, len(index)) for line in lines] and kinds == list(index)
        assert [text[a: b - 1] for a, b in zip(starts.tolist(), starts[1:].tolist())] == lines


@built
@pytest.mark.parametrize("size", [1, 7, 64, 4096])
def test_blocks_end_at_line_ends_and_lose_nothing(size: int) -> None:
    text = b"".join(b"line %d %s\n" % (i, b"x" * (i % 97)) for i in range(500)) + b"tail without newline"
    got = list(linescan.blocks(io.BytesIO(text), size))
    assert b"".join(got) == text
    assert all(block.endswith(b"\n") for block in got[:-1])
    scanned = list(linescan.scanned(iter(got)))
    assert [block for block, _ in scanned] == got
    assert sum(len(scan) for _, scan in scanned) == 501


def test_the_scanner_is_built_where_a_c_compiler_is() -> None:
    """An install with a compiler at hand must not fall back silently (setup.py marks the extension
    optional only for machines without one)."""
    import os
    import shutil
    import sysconfig

    headers = os.path.join(sysconfig.get_paths()["include"], "Python.h")
    if not (shutil.which("cc") or shutil.which("gcc")) or not os.path.exists(headers):
        pytest.skip("no C compiler or no Python headers here")
    from stethoscope.logtext import _linescan  # noqa: F401  (ImportError: the build failed)


@built
def test_random_bytes_never_break_the_scanner() -> None:
    """Whatever the bytes, widths, picks and offsets: arrays that agree with each other, or None."""
    import numpy as np

    rng = random.Random(3)
    alphabet = b"0123456789.+-eE, \t\r\n:|=[]abcxyz/%\xff\x00"
    for it in range(3000):
        data = bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 200)))
        got = linescan.scan(data, offsets=bool(it % 2))
        assert got.values.size == int(got.counts.sum()) and got.starts.size == len(got)
        width = rng.randint(0, 8)
        picks = rng.sample(range(width), rng.randint(0, width))
        starts = None
        if it % 3 == 0:
            starts = np.array([rng.randint(-2, len(data) + 2) for _ in range(rng.randint(0, 5))], np.int64)
        table = linescan.columns(data, width, picks, "".join(rng.choice("fisdhmr") for _ in picks),
                                 [rng.random() < 0.3 for _ in picks], starts)
        assert table is None or table.shape[1] == len(picks)


_FLOAT_TOKEN = re.compile(rb"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_KEPT = frozenset(b"0123456789.+-eE,")


def _columns_reference(data: bytes, width: int, picks: list[int], kinds: str) -> list[list[float]] | None:
    """`_linescan.columns` as its docstring states it, for kinds `f` and `i` without commas to drop: a token
    is a run of `0-9.+-eE,`, a comma that a byte outside them (not the newline) follows being a blank;
    `f` reads a token as float() does, `i` one of at most 15 digits after a sign; a row whose token count
    is not `width`, or a picked token that does not read so, gives None."""
    rows = []
    lines = data.split(b"\n")
    if lines[-1] == b"":  # the text after the last newline is a line when it is not empty
        lines.pop()
    for line in lines:
        kept = bytes(c in _KEPT and not (c == 44 and j + 1 < len(line) and line[j + 1] not in _KEPT)
                     for j, c in enumerate(line))
        spans = [m.span() for m in re.finditer(b"\x01+", kept)]
        if len(spans) != width:
            return None
        row = []
        for pick, kind in zip(picks, kinds):
            text = line[spans[pick][0]: spans[pick][1]]
            digits = text.lstrip(b"+-")
            if len(text) > 63 or (kind == "f" and not _FLOAT_TOKEN.fullmatch(text)) or \
                    (kind == "i" and not (digits.isdigit() and len(digits) <= 15 and len(text) - len(digits) <= 1)):
                return None
            row.append(float(text))
        rows.append(row)
    return rows


def _number(rng: random.Random) -> str:
    return rng.choice([
        lambda: repr(rng.random() * 10 ** rng.randint(-9, 6)),  # 16-17 digits: the quotient checked in 128 bits
        lambda: f"{rng.random() * 10 ** rng.randint(-25, 25):.{rng.randint(0, 21)}g}",
        lambda: f"{rng.random() * 10 ** rng.randint(-30, 30):.{rng.randint(0, 25)}e}",
        lambda: f"{rng.random():.{rng.randint(1, 30)}f}",  # long fractions: digits read 8 at a time
        lambda: str(rng.randint(-10 ** rng.randint(1, 20), 10 ** rng.randint(1, 20))),
        lambda: rng.choice(["-0", "-0.0", ".5", "5.", "+3", "007", "1e", "1.2.3", "0" * 70 + "5", "1,5", "0.1e-5",
                            "9007199254740993", "123456789012345678901", "4.9e-324", "1e-22", "1e23", "00000000.5"]),
    ])()


@built
def test_token_columns_read_as_their_rules_say() -> None:
    """The token columns (bytes classed 16 at a time, a fraction's digits 8 at a time, quotients checked in
    128-bit integers, the byte loop near the data's end) against `_columns_reference`: lines of one template
    with other numbers, tokens and lines that cross 16-byte blocks (long bars, long numbers), with and without
    a last newline, every picked value the double float() gives, or None where a row does not read."""
    import numpy as np

    rng = random.Random(11)
    seps = [" ", ": ", ", ", ",", "=", " | ", "[", "]", " e ", "E", "x", "\t", "'loss': ", "/", "-", ".", "\r",
            "." * 31, "=" * 20, " " * 17, "[>" + "." * 29 + "]", "x" * 40, ",,,", "-" * 18, ", '"]
    read = 0
    for _ in range(3000):
        template = [rng.choice(seps) for _ in range(rng.randint(0, 9))]
        lines = ["".join(sep + _number(rng) for sep in template) + rng.choice(["", " ", ",", "'}", ", x"])
                 for _ in range(rng.randint(1, 12))]
        data = ("\n".join(lines) + rng.choice(["\n", "\n", ""])).encode()
        first = data.split(b"\n")[0]
        width = sum(1 for j, c in enumerate(first) if c in _KEPT and (j == 0 or first[j - 1] not in _KEPT))
        width = width if rng.random() < 0.9 else rng.randint(0, 10)
        picks = rng.sample(range(width), rng.randint(0, min(width, 5)))
        kinds = "".join(rng.choice("ffffi") for _ in picks)
        want = _columns_reference(data, width, picks, kinds)
        got = linescan.columns(data, width, picks, kinds, [False] * len(picks))
        if want is None or got is None:
            assert got is None and want is None, data
            continue
        read += 1
        assert got.shape == (len(want), len(picks))
        assert [struct.pack("d", v) for v in got.ravel().tolist()] == \
            [struct.pack("d", v) for row in want for v in row], data
        starts = np.array([0] + [j + 1 for j, c in enumerate(data[:-1]) if c == 10], np.int64)[:len(want)]
        assert np.array_equal(linescan.columns(data, width, picks, kinds, [False] * len(picks), starts[::-1])[::-1],
                              got)
    assert read > 500  # the comparison is not of Nones only


@built
def test_shapes_and_repeats_across_blocks_are_the_python_ones() -> None:
    """Shapes made and compared 16 bytes at a time (packed by a byte shuffle where the CPU has one) against
    `console_runs.shape_of` and a count of whole units in them: long lines (bars, long numbers, words with
    e's), from any offset to any end, runs and cycles that break late in a line or not at all."""
    from stethoscope.logtext.console_runs import shape_of

    rng = random.Random(12)
    pieces = [b"=" * 23, b"[" + b"=" * 17 + b">" + b"." * 12 + b"]", b"0.9478274870593494", b"1.6965e-05", b"-12",
              b"'learning_rate': ", b"\t Train loss/train/total: ", b" - ETA: ", b"x" * 19, b"E+", b" ", b"\r"]
    for _ in range(1500):
        units = [b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 7))) for _ in range(3)]
        k = rng.randint(1, 3)
        lines = [units[i % k] for i in range(rng.randint(0, 40))]
        if lines and rng.random() < 0.5:  # a line that differs, somewhere late in it
            at = rng.randrange(len(lines))
            lines[at] = lines[at] + rng.choice([b"y", b"5", b"="])
        data = b"\n".join(lines) + rng.choice([b"\n", b""])
        a = rng.randint(0, len(data))
        b = rng.randint(a, len(data))
        assert linescan.shapes(data, a, b) == shape_of(data[a:b])
        shapes = shape_of(data)
        unit = b"".join(line + b"\n" for line in shapes.split(b"\n")[:k])
        if unit.count(b"\n") != k:
            continue
        count = 0
        while shapes.startswith(unit, count * len(unit)):
            count += 1
        end = len(b"\n".join(data.split(b"\n")[:count * k])) + 1 if count else 0
        assert linescan.repeats(data, 0, unit) == (count, end)


@built
def test_long_line_walks_agree_with_splitting() -> None:
    """The newline walk 16 bytes at a time, then the rest by memchr: lines of any length (empty, within a
    block, across blocks), from any offset, for fewer, as many and more lines than there are."""
    rng = random.Random(13)
    for _ in range(2000):
        text = b"".join(b"x" * rng.choice([0, 1, 5, 15, 16, 17, 40]) + b"\n" for _ in range(rng.randint(0, 30)))
        text += b"y" * rng.randint(0, 20)
        start = rng.randint(0, len(text))
        count = rng.randint(0, 35)
        ends = [i + 1 for i in range(start, len(text)) if text[i] == 10][:count]
        assert linescan.line_starts(text, start, count).tolist() == [start, *ends]
        assert linescan.skip_lines(text, start, count) == (len(ends), ends[-1] if ends else start)
