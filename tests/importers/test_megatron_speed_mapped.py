"""A big, settled Megatron log is read from its mapping (`linescan.mapped`, blocks as views of it:
`megatron_native.mapped_blocks`), not copied: the same points, lines, warnings and metadata as the stream read,
at any block size (lines cut at a block's end, a line longer than a block), and the map is closed after."""

from __future__ import annotations

import math

import pytest

from stethoscope.importers import megatron, megatron_native
from stethoscope.importers.megatron import MegatronImporter
from stethoscope.logtext import linescan
from tests.importers.test_megatron import _awkward_log

built = pytest.mark.skipif(not linescan.available(), reason="the line scanner was not built (no C compiler)")


def _same(run) -> tuple:
    points = [(n, s, "nan" if math.isnan(v) else v, t) for n, s, v, t in zip(*run.columns)]
    return points, run.lines, run.warnings, run.meta


@built
@pytest.mark.parametrize("chunk_bytes", [None, 700, 1 << 14])
def test_a_mapped_log_reads_as_its_stream(write, monkeypatch, chunk_bytes: int | None) -> None:
    text = _awkward_log().replace("\n iteration 6001", "\n" + "x" * 3000 + "\n iteration 6001")  # a long line
    path = write("train.log", text)
    monkeypatch.setattr(linescan, "MAP_FROM", 0)  # this small log is mapped as a big one would be
    monkeypatch.setattr(linescan, "MAP_QUIET_S", -1.0)
    maps: list[object] = []
    real_blocks, real_close = megatron_native.mapped_blocks, megatron_native.close_map
    monkeypatch.setattr(megatron, "mapped_blocks", lambda log, size: maps.append(log) or real_blocks(log, size))
    closed: list[bool] = []
    monkeypatch.setattr(megatron, "close_map", lambda log: (real_close(log), closed.append(log.closed)))
    mapped = MegatronImporter(chunk_bytes=chunk_bytes).read(path)
    assert len(maps) == 1 and closed == [True]
    monkeypatch.setattr(linescan, "mapped", lambda _: None)
    streamed = MegatronImporter(chunk_bytes=chunk_bytes).read(path)
    assert _same(mapped) == _same(streamed)
    assert _same(mapped) == _same(MegatronImporter(fast=False).read(path))
