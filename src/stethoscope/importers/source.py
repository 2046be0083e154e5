"""Opening a foreign log file: the existence checks and reads every importer shares."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Protocol

from stethoscope.errors import InputError
from stethoscope.importers.base import ImportedRun

# Enough to get past a Megatron argument dump or an nvidia-smi table before the first metric line.
HEAD_BYTES = 256 * 1024


def check_file(path: Path) -> Path:
    """`path` if it is a readable regular file; otherwise an InputError that names it."""
    if not path.exists():
        raise InputError(path, "no such file or directory")
    if path.is_dir():
        raise InputError(path, "is a directory, expected a log file")
    if not path.is_file():
        raise InputError(path, "not a regular file")
    return path


def read_bytes(path: Path) -> bytes:
    """The whole file as bytes; InputError when it is missing or unreadable."""
    check_file(path)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None


def read_text(path: Path) -> str:
    """The whole file decoded as UTF-8 (undecodable bytes replaced, never an error)."""
    return read_bytes(path).decode("utf-8", errors="replace")


def read_head(path: Path, size: int = HEAD_BYTES) -> str:
    """The first `size` bytes decoded leniently; what `Importer.sniff` looks at."""
    check_file(path)
    try:
        with path.open("rb") as f:
            head = f.read(size)
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None
    return head.decode("utf-8", errors="replace")


def is_text(head: str) -> bool:
    """False for binary content (NUL bytes), which no text importer should claim."""
    return "\x00" not in head


class LineReader(Protocol):
    """Reads a text log line by line: `line()` says whether the line carried metrics."""

    warnings: list[str]

    def line(self, number: int, text: str) -> bool: ...

    def result(self) -> ImportedRun: ...


def read_lines(path: Path, reader: LineReader, cut: re.Pattern[str]) -> ImportedRun:
    """Feed every line of a text log to `reader`; warn when the last line looks cut short (`cut`
    matches it but nothing was read from it)."""
    from stethoscope.importers.table import gc_paused

    lines = read_text(path).split("\n")
    parsed = False
    with gc_paused():
        for number, text in enumerate(lines, 1):
            parsed = reader.line(number, text.rstrip())
        if not parsed and cut.search(lines[-1]):
            reader.warnings.append(f"{path}:{len(lines)}: the last line looks cut short (no newline, no "
                                   "metrics read from it)")
        return reader.result()
