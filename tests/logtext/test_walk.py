"""How the console reader walks a log (`logtext/console_walk.py`): runs and cycles found over the log itself
by the native scanner (`_linescan.shapes`, `_linescan.repeats`) count what the shapes made in Python count;
a log read a segment at a time, mapped or copied, with or without the scanner, gives the same points as
line by line, on every shape the import bench times."""

from __future__ import annotations

import io
import os
import random
import sys
import time
from pathlib import Path

import pytest

from stethoscope.importers.console import ConsoleImporter
from stethoscope.logtext import console_walk, linescan
from stethoscope.logtext.console_reader import ConsoleReader
from stethoscope.logtext.console_runs import repeats, shape_of

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import import_speed  # noqa: E402

built = pytest.mark.skipif(not linescan.available(), reason="the line scanner was not built (no C compiler)")
_PIECES = [b"step ", b"loss=", b"1", b"23", b"2.5e-05", b"-0.5", b"+3", b" | ", b"[==>..]", b"\t", b"x", b"\r", b"E"]


def _text(rng: random.Random, lines: int) -> bytes:
    units = [b"".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 6))) for _ in range(3)]
    return b"".join(rng.choice(units) + b"\n" for _ in range(lines)) + rng.choice([b"", units[0]])


@built
@pytest.mark.parametrize("seed", range(200))
def test_native_shapes_and_repeats_are_the_python_ones(seed: int) -> None:
    rng = random.Random(seed)
    data = _text(rng, rng.randint(0, 60))
    start = data.find(b"\n", 0, rng.randint(0, len(data) + 1)) + 1  # a line's start
    assert linescan.shapes(data, start, len(data)) == shape_of(data[start:])
    shapes = shape_of(data[start:])
    for k in (1, 2, 3):  # a run, and cycles of 2 and 3 lines
        unit = b"".join(line + b"\n" for line in shapes.split(b"\n")[:k])
        if unit.count(b"\n") != k:
            continue
        count, end = linescan.repeats(data, start, unit)
        assert count == repeats(shapes, 0, unit)
        assert end == start + len(b"".join(data[start:].split(b"\n")[:count * k])) + count * k


def _shape_log(write, lines: int) -> bytes:
    rng, out = random.Random(2), io.StringIO()
    for s in range(1, lines + 1):
        write(out, s, rng)
    return out.getvalue().encode()


def _small_segments(monkeypatch) -> None:
    monkeypatch.setattr(console_walk, "FIRST_SEGMENT_BYTES", 1 << 12)
    monkeypatch.setattr(console_walk, "SEGMENT_BYTES", 1 << 14)


def _read(data: bytes):
    reader = ConsoleReader("log")
    reader.feed(data)
    run = reader.result()
    c = run.columns
    return (list(c.names), list(c.steps), [v if v == v else "nan" for v in c.values], list(c.times), run.warnings,
            run.meta, reader.lines, reader.step_lines)


def _line_by_line(data: bytes):
    reader = ConsoleReader("log")
    for number, line in enumerate(data.split(b"\n"), 1):
        reader.line(number, line)
    c = reader.result().columns
    return list(c.names), list(c.steps), [v if v == v else "nan" for v in c.values]


@pytest.mark.parametrize("native", ["1", "0"], ids=["scanner", "python"])
@pytest.mark.parametrize("shape", list(import_speed.CONSOLE_SHAPES))
def test_every_bench_shape_reads_as_line_by_line_with_or_without_the_scanner(shape, native, monkeypatch) -> None:
    """Each shape `bench/import_speed.py` times, with segments of 4 to 16 KiB (runs and cycles cut where they
    end, windows made from a segment's shapes): the same points as the full line parser reads."""
    monkeypatch.setenv("STETHOSCOPE_NATIVE", native)
    _small_segments(monkeypatch)
    data = _shape_log(import_speed.CONSOLE_SHAPES[shape], 3000)
    got = _read(data)
    assert got[:3] == _line_by_line(data) and len(set(got[1])) >= 700
    monkeypatch.setattr(console_walk, "FIRST_SEGMENT_BYTES", 1 << 23)
    assert _read(data) == got  # one segment: the same points, warnings and counts


@built
def test_a_mixed_log_reads_the_same_with_and_without_the_scanner(monkeypatch) -> None:
    """Runs of the bench shapes one after another, lines of other shapes between: the scanner's walk and the
    pure-Python one give the same points, warnings and line counts (segments of 4 to 16 KiB)."""
    _small_segments(monkeypatch)
    parts = [_shape_log(write, n) for write, n in zip(import_speed.CONSOLE_SHAPES.values(), (700, 90, 400, 300, 2100, 800))]
    data = b"Traceback (most recent call last):\n  oops\n".join(parts) + b"step 9 | loss"
    native = _read(data)
    monkeypatch.setenv("STETHOSCOPE_NATIVE", "0")
    assert _read(data) == native and native[5]["confidence"] > 0.5


@built
def test_a_big_log_is_mapped_and_reads_as_its_bytes(tmp_path, monkeypatch) -> None:
    path = tmp_path / "train.log"
    path.write_bytes(_shape_log(import_speed.CONSOLE_SHAPES["key: value (torchtitan)"], 5000))
    monkeypatch.setattr(linescan, "MAP_FROM", 1 << 12)
    assert linescan.mapped(str(path)) is None  # written a moment ago: a live log, copied (a truncation is safe)
    finished = time.time() - 3600
    os.utime(path, (finished, finished))
    assert linescan.mapped(str(path)) is not None
    mapped = ConsoleImporter().read(path)
    monkeypatch.setattr(linescan, "MAP_FROM", 1 << 40)
    assert linescan.mapped(str(path)) is None
    copied = ConsoleImporter().read(path)
    assert list(mapped.columns.values) == list(copied.columns.values) and len(set(mapped.columns.steps)) == 5000
