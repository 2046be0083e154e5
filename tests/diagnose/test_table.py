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


def test_name_codes_the_same_whether_name_strings_are_shared_or_one_per_point() -> None:
    """Importers share one string object per series name; rows read from SQLite bring one per point.
    Both must code alike, and the second must not fall back to a loop per distinct object (a live store
    of 300k points took 45 s in `show`)."""
    from stethoscope.diagnose.table import _name_codes

    base = ["train/loss", "perf/step_time_s", "extra/a"]
    shared = [base[i % 3] for i in range(20_000)]
    fresh = ["".join(list(base[i % 3])) for i in range(20_000)]  # equal, but distinct objects
    assert len({id(x) for x in fresh[:100]}) == 100
    names_a, codes_a = _name_codes(shared)
    names_b, codes_b = _name_codes(fresh)
    assert names_a == names_b == base
    assert (codes_a == codes_b).all() and codes_a[:6].tolist() == [0, 1, 2, 0, 1, 2]
