"""A log redirected by Windows PowerShell (`python train.py > train.log`) is UTF-16 with a byte-order mark:
every reader sees it as the text it is (it was refused as 'no known log format')."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from stethoscope.importers.registry import read_any
from stethoscope.logtext import linescan
from stethoscope.records import LOSS


def _losses(path: Path) -> list[tuple[int, float]]:
    c = read_any(path)[0].columns
    return [(s, v) for n, s, v in zip(c.names, c.steps, c.values) if n == LOSS]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
def test_a_utf16_console_log_is_read(tmp_path: Path, encoding: str) -> None:
    path = tmp_path / "train.log"
    text = "".join(f"step {i} | loss {4 - i / 100:.3f} | lr 1e-4\r\n" for i in range(1, 40))
    bom = {"utf-16-le": "\ufeff", "utf-16-be": "\ufeff"}.get(encoding, "")  # `utf-16` writes its own
    path.write_bytes((bom + text).encode(encoding))
    assert _losses(path)[:2] == [(1, 3.99), (2, 3.98)] and len(_losses(path)) == 39


def test_a_utf16_csv_is_read(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("step,loss\n" + "".join(f"{i},{2 - i / 100}\n" for i in range(10)), encoding="utf-16")
    assert _losses(path)[-1] == (9, 1.91)


def test_a_big_utf16_log_is_not_mapped_raw(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    lines = [f"step {i} loss {3 - i * 1e-5:.5f}" for i in range(1, 150_001)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-16")
    old = time.time() - 3600
    os.utime(path, (old, old))  # a finished log: big ones are mapped when plain
    assert path.stat().st_size >= linescan.MAP_FROM
    assert linescan.mapped(str(path)) is None
    got = _losses(path)
    assert len(got) == 150_000 and got[-1] == (150_000, 1.5)


def _docker(lines: list[str]) -> bytes:
    import json

    return b"".join(json.dumps({"log": line + "\n", "stream": "stdout",
                                "time": f"2024-07-24T11:{k // 60 % 60:02d}:{k % 60:02d}.{k * 7919 % 10**9:09d}Z"},
                               separators=(",", ":")).encode() + b"\n" for k, line in enumerate(lines))


@pytest.mark.parametrize("n", [40, 200_000])  # a small log and one big enough to be mapped were it plain
def test_dockers_json_file_log_is_read_as_the_lines_the_container_printed(tmp_path: Path, n: int) -> None:
    """`/var/lib/docker/containers/<id>/<id>-json.log` wraps each printed line in {"log":..,"stream":..,"time":..}:
    the console reader took the wrapper's numbers for the line's (the seventh grammar part: 76 misreads)."""
    path = tmp_path / "abc-json.log"
    path.write_bytes(_docker([f"Epoch: {i:03d}, Loss: {4 - i / n:.6f}, Train: 0.3000, Val: 0.2900"  # PyG's examples
                              for i in range(1, n + 1)]))
    old = time.time() - 3600
    os.utime(path, (old, old))
    got = _losses(path)
    assert len(got) == n and got[0] == (1, round(4 - 1 / n, 6)), got[:3]
    assert [s for s, _ in got] == sorted(s for s, _ in got)


def test_a_table_in_dockers_json_file_log_is_read_as_a_table(tmp_path: Path) -> None:
    header = "epoch       main/loss   validation/main/loss  main/accuracy  elapsed_time"  # Chainer's PrintReport
    rows = [f"{i:<12d}{2 / i:<12.4f}{2.1 / i:<22.4f}{0.9:<15.3f}{5.1 * i:.3f}" for i in range(1, 30)]
    path = tmp_path / "abc-json.log"
    path.write_bytes(_docker([header, *rows]))
    got = _losses(path)
    assert got[:2] == [(1, 2.0), (2, 1.0)] and len(got) == 29
