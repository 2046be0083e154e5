"""Misread and wrongly refused classes of real public logs (wild-logs-8, readers-18), each as a general rule."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from stethoscope.errors import InputError
from stethoscope.importers import read_any
from stethoscope.importers.base import ImportedRun
from stethoscope.records import LOSS
from tests.importers.series import read_text, series


def _read_bytes(data: bytes, name: str = "train.log") -> list[ImportedRun]:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / name
        path.write_bytes(data)
        return read_any(path)


def _lines(n: int = 12) -> bytes:
    return "".join(f"step {10 * k:5d} | loss {3.0 - k / 20:.4f} | lr 3.0e-04 | 500 tok/s\n"
                   for k in range(1, n + 1)).encode()


def test_a_hole_of_nuls_before_the_text_is_skipped() -> None:
    """A log truncated while its writer held it open starts with NULs: it was judged binary (refused)."""
    (run,) = _read_bytes(b"\x00" * 4096 + _lines())
    assert series(run, LOSS) == {10 * k: round(3.0 - k / 20, 4) for k in range(1, 13)}


def test_zeroed_blocks_at_the_end_are_skipped() -> None:
    """The zeroed tail a crash leaves: the text before it is read."""
    (run,) = _read_bytes(_lines() + b"\x00" * 512)
    assert len(series(run, LOSS)) == 12


def test_binary_data_with_scattered_nuls_is_still_refused() -> None:
    """A guard: NULs among other control bytes (a checkpoint, an image) are binary, not a padded log."""
    blob = bytes(range(256)) * 64
    with pytest.raises(InputError):
        _read_bytes(b"\x00" * 64 + blob + _lines())


def _read_runs(text: str) -> list[ImportedRun]:
    return _read_bytes(text.encode())


def test_a_later_spelling_of_the_loss_at_the_same_step_does_not_overwrite_it() -> None:
    """`[step N] loss=..` then `[step N] avg_loss=0.0000` (another quantity): the loss was overwritten with 0."""
    text = "".join(f"[step {k}] loss={0.14 + k / 1e4:.4f} rewards(c/r)=-0.01/-0.01\n"
                   + (f"[step {k}] avg_loss=0.0000\n" if k % 5 == 0 else "") for k in range(1, 21))
    run = read_text(text)
    assert series(run, LOSS) == {k: round(0.14 + k / 1e4, 4) for k in range(1, 21)}
    assert series(run, "avg_loss") == {k: 0.0 for k in range(5, 21, 5)}
