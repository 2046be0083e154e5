"""Near duplicates by MinHash over word 3-gram shingles, with LSH banding (opt-in: `--near minhash`).

Catches copies with small edits (a changed name, a sentence added) that normalized-text hashing
misses. 64 multiply-shift hash functions give one 64-value signature per row, computed for batches
of rows at once with numpy; 16 bands of 4 values find candidate pairs, and a pair is a near duplicate
when their signatures agree on ≥ 80% of values (estimated Jaccard similarity of the shingle sets).
Memory: 64 × 2-byte signature values + 16 × 8-byte band keys, 256 bytes per row (256 MB for a million
rows). Rows of fewer than 3 words take no part (the exact and normalized checks cover them). Words are
hashed with two CRC-32s of their UTF-8 bytes (64 bits, not Python's per-process salted `hash`), so the
same files give the same near duplicates in every run.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np

PERMUTATIONS = 64
BANDS = 16
ROWS_PER_BAND = PERMUTATIONS // BANDS
THRESHOLD = 0.8
SHINGLE = 3
_RNG = np.random.default_rng(20240601)  # fixed: the same text gets the same signature in every file
_A = (_RNG.integers(1, 2**63, size=PERMUTATIONS, dtype=np.uint64) * np.uint64(2)) + np.uint64(1)  # odd multipliers
_B = _RNG.integers(0, 2**63, size=PERMUTATIONS, dtype=np.uint64)
_MIX = np.array([0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9], dtype=np.uint64)
_BAND_MIX = _RNG.integers(1, 2**63, size=ROWS_PER_BAND, dtype=np.uint64) | np.uint64(1)


@dataclass
class Signatures:
    """Signatures of the rows of one file, batch by batch."""

    rows: list[np.ndarray] = field(default_factory=list)
    sigs: list[np.ndarray] = field(default_factory=list)  # (n, PERMUTATIONS) uint16: low bits, for agreement
    bands: list[np.ndarray] = field(default_factory=list)  # (n, BANDS) uint64: band keys from the full values
    pending: list[tuple[int, str]] = field(default_factory=list)

    def add(self, row: int, text: str) -> None:
        self.pending.append((row, text))
        if len(self.pending) >= 4096:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            rows, sigs, bands = signatures(self.pending)
            self.rows.append(rows)
            self.sigs.append(sigs)
            self.bands.append(bands)
            self.pending = []

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self.flush()
        if not self.rows:
            return (np.zeros(0, dtype=np.int64), np.zeros((0, PERMUTATIONS), dtype=np.uint16),
                    np.zeros((0, BANDS), dtype=np.uint64))
        return np.concatenate(self.rows), np.concatenate(self.sigs), np.concatenate(self.bands)


def _word_hash(word: str) -> int:
    """A 64-bit hash of a word that is the same in every process (two CRC-32s with different seeds)."""
    data = word.encode("utf-8", "surrogatepass")
    return zlib.crc32(data) | (zlib.crc32(data, 0x5BD1E995) << 32)


def signatures(batch: list[tuple[int, str]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, 16-bit signatures, band keys) of the rows in `batch` that have ≥ SHINGLE words."""
    words: list[str] = []
    starts, rows = [], []
    for row, text in batch:
        w = text.lower().split()
        if len(w) >= SHINGLE:
            starts.append(len(words))
            rows.append(row)
            words.extend(w)
    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros((0, PERMUTATIONS), np.uint16), np.zeros((0, BANDS), np.uint64)
    h = np.fromiter(map(_word_hash, words), dtype=np.uint64, count=len(words))
    with np.errstate(over="ignore"):
        sh = h[:-2] * _MIX[0] + h[1:-1] * _MIX[1] + h[2:] * _MIX[2]  # one value per 3-word window
    bounds = np.array(starts + [len(words)], dtype=np.int64)
    # Windows that start in one row and end in the next are dropped: keep [start, end - SHINGLE].
    keep = np.zeros(len(sh), dtype=bool)
    for s, e in zip(bounds[:-1], bounds[1:]):
        keep[s:e - SHINGLE + 1] = True
    sh = sh[keep]
    seg = np.concatenate([[0], np.cumsum(bounds[1:] - bounds[:-1] - SHINGLE + 1)[:-1]])
    sig = np.empty((len(rows), PERMUTATIONS), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for k in range(PERMUTATIONS):
            sig[:, k] = np.minimum.reduceat(sh * _A[k] + _B[k], seg)
    bands = sig.reshape(len(rows), BANDS, ROWS_PER_BAND)
    with np.errstate(over="ignore"):
        keys = (bands * _BAND_MIX).sum(axis=2, dtype=np.uint64)
    return np.array(rows, dtype=np.int64), (sig >> np.uint64(48)).astype(np.uint16), keys


def near_duplicates(rows: np.ndarray, sigs: np.ndarray, bands: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows that nearly repeat an earlier row, that earlier row), earliest match per row."""
    pairs = []
    for b in range(BANDS):
        _, first, inverse = np.unique(bands[:, b], return_index=True, return_inverse=True)
        firsts = first[inverse]
        hit = firsts != np.arange(len(rows))
        pairs.append(np.stack([np.nonzero(hit)[0], firsts[hit]], axis=1))
    return _confirmed(rows, sigs, rows, sigs, np.concatenate(pairs) if pairs else np.zeros((0, 2), np.int64))


def near_matches(train: tuple[np.ndarray, np.ndarray, np.ndarray], other: tuple[np.ndarray, np.ndarray, np.ndarray]
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(rows of `other` nearly the same as a row of `train`, that training row)."""
    t_rows, t_sigs, t_bands = train
    o_rows, o_sigs, o_bands = other
    pairs = []
    for b in range(BANDS):
        if not len(t_rows):
            break
        keys, first = np.unique(t_bands[:, b], return_index=True)
        pos = np.minimum(np.searchsorted(keys, o_bands[:, b]), len(keys) - 1)
        hit = keys[pos] == o_bands[:, b]
        pairs.append(np.stack([np.nonzero(hit)[0], first[pos[hit]]], axis=1))
    return _confirmed(o_rows, o_sigs, t_rows, t_sigs, np.concatenate(pairs) if pairs else np.zeros((0, 2), np.int64))


def _confirmed(a_rows: np.ndarray, a_sigs: np.ndarray, b_rows: np.ndarray, b_sigs: np.ndarray,
               pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Candidate pairs (index into a, index into b) whose signatures agree on ≥ THRESHOLD of values;
    for each a, the earliest b."""
    if not len(pairs):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    agree = (a_sigs[pairs[:, 0]] == b_sigs[pairs[:, 1]]).mean(axis=1) >= THRESHOLD
    pairs = pairs[agree]
    order = np.lexsort((b_rows[pairs[:, 1]], pairs[:, 0]))
    pairs = pairs[order]
    keep = np.ones(len(pairs), dtype=bool)
    keep[1:] = pairs[1:, 0] != pairs[:-1, 0]
    pairs = pairs[keep]
    return a_rows[pairs[:, 0]], b_rows[pairs[:, 1]]
