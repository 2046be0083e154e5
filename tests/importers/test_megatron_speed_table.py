"""The replay screen's jumps (`diagnose.table.Table._jumps`) compared block by block, not value by value: the
same rows and scores, to the bit, as the per-value statement it replaced (`_reference`, kept here), on series
with NaNs, infinities, plateaus, spikes and lengths that do not fill their last block."""

from __future__ import annotations

import numpy as np
import pytest

from stethoscope.diagnose.table import _BLOCK, Table, _previous_block_levels


def _reference(v: np.ndarray, rel: float, sigmas: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The screen as it read before (rows = positions): every block's level repeated over its values."""
    bad = ~np.isfinite(v)
    prev, prev_noise = _previous_block_levels(np.where(bad, np.nan, v), _BLOCK)
    ref, noise = np.repeat(prev, _BLOCK)[:v.size], np.repeat(prev_noise, _BLOCK)[:v.size]
    bar = np.maximum(rel * np.abs(ref), sigmas * noise)
    with np.errstate(all="ignore"):
        score = (v - ref) / bar
    up = np.isfinite(ref) & (v > ref + bar)
    first_bad = bad & ~np.concatenate(([False], bad[:-1]))
    rows = np.arange(v.size)
    return rows[first_bad], rows[up], np.where(np.isfinite(score[up]), score[up], np.inf)


def _series(rng: np.random.Generator, n: int) -> np.ndarray:
    v = 2 + 4 * np.exp(-np.arange(n) / max(n / 5, 1)) + rng.normal(0, 0.05, n)
    v[rng.random(n) < 0.01] *= 3  # spikes
    v[rng.random(n) < 0.005] = np.nan
    v[rng.random(n) < 0.002] = np.inf
    if n > 400:
        v[100:300] = 1.5  # a plateau: zero noise
        v[-50:] = np.nan
    return v


@pytest.mark.parametrize("n", [1, 31, 32, 33, 257, 1000, 4099, 20_000])
def test_jumps_by_block_are_the_per_value_ones(n: int) -> None:
    rng = np.random.default_rng(n)
    for _ in range(3):
        v = _series(rng, n)
        table = Table(["x"], np.arange(n, dtype=np.int64) * 3, v[:, None].copy(), np.ones((n, 1), bool), None)
        for rel, sigmas in ((0.1, 4.0), (0.0, 2 / 3 * 6), (0.5, 0.0)):
            got, want = table._jumps("x", rel, sigmas), _reference(v, rel, sigmas)
            for g, w in zip(got, want):
                assert g.tolist() == w.tolist()  # == on lists: NaN never, infinities and doubles exactly


@pytest.mark.parametrize("width", [7, 8, 32])
def test_sorted_medians_are_np_median_to_the_bit(width: int) -> None:
    """Block medians by sorting (`_sorted_medians`): np.median's doubles, signed zeros in the middle included."""
    from stethoscope.diagnose.table import _block_medians

    rng = np.random.default_rng(width)
    for trial in range(40):
        rows = rng.choice([-0.0, 0.0, 1.0, -1.0, 2.5, np.inf, -np.inf, 1e308], size=(300, width))
        if trial % 2:
            rows = rng.standard_normal((300, width)) * 10.0 ** rng.integers(-300, 300)
            rows[::7, : width // 2] = rng.choice([-0.0, 0.0], size=(len(rows[::7]), width // 2))
        with np.errstate(all="ignore"):
            assert _block_medians(rows).tobytes() == np.median(rows, axis=1).tobytes()
