"""The line scanner's shape hash (text read 16 bytes at a time, the shape hashed a word at a time) against the
plain-Python shape of tests/importers/test_linescan.py: two lines share a hash exactly when they share a shape,
on lines long enough for every path (text runs across 16-byte blocks, shapes past the hash's 64-byte flush,
numbers at a block's edge, a block's last bytes at the end of the data), and their numbers are float()'s."""

from __future__ import annotations

import random

import pytest

from stethoscope.logtext import linescan
from tests.importers.test_linescan import _reference, _same_floats

built = pytest.mark.skipif(not linescan.available(), reason="the line scanner was not built (no C compiler)")

_TOKENS = [b" ", b"  ", b"         ", b"\t", b"\r", b"|", b":", b"=", b",", b"/", b"(", b")", b"e", b"E", b"-", b"+",
           b".", b"_", b"\xff", b"\x00", b"loss", b"lr", b"A100", b"fp16", b"rank0", b"iteration", b"nan", b"x1e5",
           b"1", b"22", b"3.5", b"-0.25", b"1e-3", b"6.003E+00", b"12345678901234567890", b"0.000001", b"7.",
           b"1.0000000000000002", b"1e400", b".5", b"+3", b"12e", b"-.", b"+-1"]


def _line(rng: random.Random) -> bytes:
    return b"".join(rng.choice(_TOKENS) for _ in range(rng.randint(0, 120)))


@built
def test_same_hash_exactly_when_same_shape() -> None:
    rng = random.Random(11)
    lines = [_line(rng) for _ in range(3000)]
    lines += [line.replace(b" ", b"   ") for line in lines[:500]]  # the same shapes, other padding
    lines += [b"x" * k + b" 1" for k in range(0, 90)]  # shapes of every length around the words and the flush
    data = b"\n".join(lines)
    got = linescan.scan(data, offsets=True)
    assert len(got) == len(lines)
    by_shape: dict[bytes, int] = {}
    by_hash: dict[int, bytes] = {}
    numbers: list[float] = []
    for line, h in zip(lines, got.hashes.tolist()):
        shape, values, _ = _reference(line)
        numbers += values
        assert by_shape.setdefault(shape, h) == h  # one shape, one hash
        assert by_hash.setdefault(h, shape) == shape  # one hash, one shape
    assert _same_floats(got.values.tolist(), numbers)


@built
@pytest.mark.parametrize("tail", [0, 1, 7, 15, 16, 17, 31])
def test_lines_near_the_end_of_the_data_read_alike(tail: int) -> None:
    """The last bytes of a block (fewer than 16 left) take the byte loop: same hashes and numbers as inside it."""
    line = b" iteration       12/  1000 | lm loss: 6.003E+00 | grad norm: 0.312 |" + b" " * tail
    whole = linescan.scan(line + b"\n" + line)
    assert whole.hashes[0] == whole.hashes[1] and whole.counts.tolist() == [4, 4]
    assert whole.values.tolist() == [12.0, 1000.0, 6.003, 0.312] * 2
    assert linescan.scan(line).hashes[0] == whole.hashes[0]
