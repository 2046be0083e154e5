from __future__ import annotations

import warnings

import numpy as np

from stethoscope.diagnose.table import _block_medians


def test_block_medians_are_nanmedians_to_the_bit() -> None:
    rng = np.random.default_rng(0)
    for trial in range(60):
        blocks = rng.standard_normal((500, 32)) * 10.0 ** rng.integers(-300, 300)
        if trial % 3 == 0:
            blocks = np.round(blocks * 3) / 3  # ties
        if trial % 2:
            blocks[rng.integers(0, 500, 40), rng.integers(0, 32, 40)] = np.nan
            blocks[7] = np.nan  # a row of NaNs only
            blocks[9, 0] = np.inf
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want = np.nanmedian(blocks, axis=1)
            got = _block_medians(blocks)
        assert got.tobytes() == want.tobytes()
