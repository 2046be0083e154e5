"""The manifest of a checkpoint: every file with its size and content hash, and the check against it.

A checkpoint counts only when `manifest.json` is present, parses, hashes to its own digest and every
file it lists has the listed size and hash, per 64 MiB chunk. The default hash is XXH3-64 (the `xxhash`
package, a dependency: ~4x zlib's CRC-32 on one core of our box); without `xxhash`, zlib's CRC-32
(stdlib). Both release the GIL: a save hashes each file from the page cache through a memory map on a
thread (no copy), and chunks verify in parallel threads. Either detects every truncation; random damage escapes with
probability 2^-64 (XXH3) or 2^-32 (CRC-32, which also catches every burst up to 32 bits) per chunk.
`hash="sha256"` trades speed for a cryptographic digest. bench/checkpoint_speed.py prints the speeds.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
FORMAT = "stethoscope-checkpoint/1"
CHUNK = 64 << 20
HASHES = ("xxh3", "crc32", "sha256")
READERS = 8
"""Chunks verified at once, whatever the core count: from disk, more reads in flight read faster (a 240 MiB
checkpoint from a cold page cache on our 2 cores: 1.3 GB/s with 2, 2.0 GB/s with 8; bench/checkpoint_speed.py)."""


def default_hash() -> str:
    """XXH3 when the `xxhash` package is there (it is a dependency), else CRC-32."""
    try:
        import xxhash  # noqa: F401
    except ImportError:
        return "crc32"
    return "xxh3"


class Digest:
    """A running hash of one algorithm."""

    def __init__(self, algo: str) -> None:
        if algo not in HASHES:
            raise ValueError(f"hash must be one of {HASHES}, got {algo!r}")
        self.algo = algo
        self._crc = 0
        self._h: Any = None
        if algo == "sha256":
            self._h = hashlib.sha256()
        elif algo == "xxh3":
            try:
                import xxhash
            except ImportError:
                raise ValueError("this checkpoint is hashed with XXH3: pip install xxhash to verify it") from None
            self._h = xxhash.xxh3_64()

    def update(self, data: bytes | memoryview) -> None:
        if self._h is not None:
            self._h.update(data)
        else:
            self._crc = zlib.crc32(data, self._crc)

    def hexdigest(self) -> str:
        return self._h.hexdigest() if self._h is not None else f"{self._crc:08x}"


def hash_file(path: Path, algo: str) -> dict[str, Any]:
    """Size and chunk hashes of a file on disk, hashed through a memory map (no copy out of the page cache)."""
    size = path.stat().st_size
    return {"bytes": size, "chunks": [_hash_range(path, i * CHUNK, CHUNK, algo) for i in range(max(1, -(-size // CHUNK)))]}


def write_manifest(directory: Path, files: dict[str, dict[str, Any]], algo: str, meta: dict[str, Any],
                   fsync: bool = True) -> None:
    body = {"format": FORMAT, "hash": algo, "chunk_bytes": CHUNK, **meta, "files": files}
    body["digest"] = _self_digest(body)
    path = directory / MANIFEST
    with open(path, "w") as f:
        json.dump(body, f, indent=1, sort_keys=True)
        if fsync:
            f.flush()
            os.fsync(f.fileno())


def read_manifest(directory: Path) -> dict[str, Any]:
    """The parsed manifest; ValueError naming the problem when it is missing, unreadable or altered."""
    path = directory / MANIFEST
    try:
        body = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError("no manifest.json (half-written: the save never finished)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"manifest.json is unreadable ({exc})") from None
    if not isinstance(body, dict) or body.get("format") != FORMAT or not isinstance(body.get("files"), dict):
        raise ValueError("manifest.json is not a stethoscope checkpoint manifest")
    if body.get("digest") != _self_digest(body):
        raise ValueError("manifest.json was altered (its own digest does not match)")
    return body


def verify(directory: Path, threads: int | None = None) -> tuple[dict[str, Any] | None, str | None]:
    """(manifest, None) when every listed file has its size and hashes; (manifest or None, why) when not."""
    try:
        body = read_manifest(directory)
    except ValueError as exc:
        return None, str(exc)
    algo, chunk = body["hash"], int(body.get("chunk_bytes", CHUNK))
    try:
        Digest(algo)
    except ValueError as exc:  # an unknown hash, or XXH3 without the xxhash package: cannot be checked
        return body, str(exc)
    why = check_sizes(directory, body)
    if why is not None:
        return body, why
    jobs = [(name, i * chunk, chunk, h) for name, entry in body["files"].items() for i, h in enumerate(entry["chunks"])]
    with ThreadPoolExecutor(max_workers=threads or READERS) as pool:
        for (name, offset, _, want), got in zip(jobs, pool.map(lambda j: _hash_range(directory / j[0], j[1], j[2], algo), jobs)):
            if got != want:
                return body, f"{name} does not match its hash at byte {offset}..{offset + chunk} (corrupt)"
    return body, None


def check_sizes(directory: Path, body: dict[str, Any]) -> str | None:
    """None when every file the manifest lists is there with its size (a stat each: catches every
    truncation and a missing file, not a flipped bit); else what is wrong."""
    for name, entry in body["files"].items():
        try:
            size = (directory / name).stat().st_size
        except OSError:
            return f"{name} is missing"
        if size != entry["bytes"]:
            return f"{name} has {size} bytes, the manifest says {entry['bytes']} (truncated or overwritten)"
    return None


def _hash_range(path: Path, offset: int, length: int, algo: str) -> str:
    """Hash bytes [offset, offset+length) through a memory map: no copy out of the page cache."""
    d = Digest(algo)
    with open(path, "rb", buffering=0) as f:
        size = os.fstat(f.fileno()).st_size
        length = min(length, size - offset)
        if length <= 0:
            return d.hexdigest()
        with mmap.mmap(f.fileno(), length, access=mmap.ACCESS_READ, offset=offset) as m:  # offset: CHUNK-aligned
            view = memoryview(m)
            try:
                d.update(view)
            finally:
                view.release()
    return d.hexdigest()


def _self_digest(body: dict[str, Any]) -> str:
    rest = {k: v for k, v in body.items() if k != "digest"}
    return hashlib.sha256(json.dumps(rest, sort_keys=True).encode()).hexdigest()
