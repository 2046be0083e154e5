"""Opening a foreign log file: the existence checks and reads every importer shares."""

from __future__ import annotations

from pathlib import Path

from stethoscope.errors import InputError

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
